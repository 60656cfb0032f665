"""A process stalled while it holds a run's row lock (SIGSTOP inside an atomic tool, or cut off
from the network) holds nobody else up for long (SPEC §20): the sweeper does not re-drive that
run, a lease is waited for no longer than ``LOCK_TIMEOUT_SECONDS``, and the server ends the
stalled session after ``IDLE_IN_TRANSACTION_SECONDS``, which frees the run for the sweeper."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import InternalError, OperationalError, connection, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from agent_core.engine import leases, outages
from agent_core.models import Run
from agent_core.runner.sweep import stale_runs
from tests.faults.conftest import lease_runs_out, start_unserved

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def stalled(shop: None, settings: Any) -> Iterator[tuple[Run, BaseDatabaseWrapper]]:
    """A run whose lease ran out while another session holds its row lock, idle in a
    transaction: a worker frozen inside an atomic tool. Connections wait 0.2 s for a lock."""
    settings.AGENT = {**settings.AGENT, "LOCK_TIMEOUT_SECONDS": 0.2}
    connection.close()  # the next one is set up with that
    run = start_unserved("support", "hello")
    lease_runs_out(run)
    frozen = connections.create_connection("default")
    frozen.set_autocommit(False)
    with frozen.cursor() as cursor:
        cursor.execute("SELECT 1 FROM agent_core_run WHERE id = %(id)s FOR UPDATE", {"id": run.pk})
    try:
        yield run, frozen
    finally:
        frozen.close()


def test_the_sweeper_skips_a_run_whose_row_a_stalled_session_holds(
    stalled: tuple[Run, BaseDatabaseWrapper],
) -> None:
    run, _ = stalled
    assert run.pk not in stale_runs()  # no worker slot is fed into the lock
    # A task that was sent all the same (delivered twice) gives up after the lock timeout: a
    # lost database to the runner (``outages``), which leaves the run to the sweeper.
    with pytest.raises(OperationalError) as raised:
        leases.acquire(run.pk, "another-worker")
    assert outages.database_lost(raised.value)


def test_every_connection_has_the_timeouts(stalled: tuple[Run, BaseDatabaseWrapper]) -> None:
    _, frozen = stalled
    with frozen.cursor() as cursor:
        cursor.execute("SHOW lock_timeout")
        assert cursor.fetchone() == ("200ms",)
        cursor.execute("SHOW idle_in_transaction_session_timeout")
        assert cursor.fetchone() == ("1min",)


def test_a_session_the_server_ended_for_idling_in_a_transaction_is_a_lost_database(
    settings: Any,
) -> None:
    # A driver that sat in its transaction past IDLE_IN_TRANSACTION_SECONDS (a frozen worker, or
    # one starved of CPU between two statements) finds its session gone: not the step's failure
    # (psycopg raises it as an InternalError, class 25, not an OperationalError).
    settings.AGENT = {**settings.AGENT, "IDLE_IN_TRANSACTION_SECONDS": 0.1}
    connection.close()  # the next one is set up with that
    with pytest.raises(InternalError) as raised, transaction.atomic():
        Run.objects.exists()
        time.sleep(0.5)
        Run.objects.exists()
    assert outages.database_lost(raised.value)
