"""The durable runner's heartbeat: one thread per process renews every lease its tasks hold.

Real rows and a real thread (its own database connection, hence a transactional database); the
lease's deadline is read back from the run's row. With ``LEASE_SECONDS = 1`` a renewal comes
every 0.33 s.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from datetime import datetime

import pytest
from django.db import connection
from django.db.models import F

from agent_core.engine import leases
from agent_core.engine.leases import Lease
from agent_core.models import Run
from agent_core.runner import heartbeat
from agent_core.runner.heartbeat import THREAD_NAME, Heartbeat
from tests.conftest import REFUND

pytestmark = pytest.mark.django_db(transaction=True)

PERIODS = 0.8  # seconds: two renewals and some
RENEWAL = 'UPDATE "agent_core_run" SET "lease_expires_at"%'  # the heartbeat's statement


@pytest.fixture(autouse=True)
def short_lease(settings) -> None:
    settings.AGENT = {**settings.AGENT, "LEASE_SECONDS": 1}


@pytest.fixture
def leased(turn) -> Callable[[], Lease]:
    """Makes a run whose lease a driver holds (what the heartbeat reads of it: the lease's
    owner, token and deadline)."""

    def make() -> Lease:
        lease = Lease(turn(REFUND).pk, 7, "worker-1")
        Run.objects.filter(pk=lease.run_id).update(
            lease_owner=lease.owner, lease_token=lease.token, lease_expires_at=leases.deadline()
        )
        return lease

    return make


def deadline(lease: Lease) -> datetime:
    until = Run.objects.values_list("lease_expires_at", flat=True).get(pk=lease.run_id)
    assert until is not None
    return until


def heartbeat_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == THREAD_NAME}


def renewing_connections() -> int:
    """Connections to the test database whose last statement was a renewal."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND query LIKE %s",
            [RENEWAL],
        )
        return int(cursor.fetchone()[0])


def test_one_thread_renews_the_lease_of_every_task_while_it_holds_it(leased) -> None:
    first, second = leased(), leased()
    taken = deadline(first), deadline(second)
    before = heartbeat_threads()
    beat = Heartbeat()
    with beat.holding(first), beat.holding(second):
        time.sleep(PERIODS)
        assert deadline(first) > taken[0] and deadline(second) > taken[1]
        started = heartbeat_threads() - before
        assert len(started) == 1
    released = deadline(first)
    time.sleep(PERIODS)
    assert deadline(first) == released  # let go of: no longer renewed
    third = leased()
    taken_third = deadline(third)
    with beat.holding(third):
        time.sleep(PERIODS)
        assert heartbeat_threads() - before == started  # the next task's: the same thread
        assert deadline(third) > taken_third


def test_a_lease_taken_over_is_dropped_from_the_renewals_with_one_warning(leased, caplog) -> None:
    lease = leased()
    Run.objects.filter(pk=lease.run_id).update(lease_token=F("lease_token") + 1)
    with caplog.at_level(logging.WARNING, "agent_core.runner.heartbeat"):
        with Heartbeat().holding(lease):
            time.sleep(2 * PERIODS)
    assert [r.getMessage() for r in caplog.records] == [f"lease of {lease.run_id} was taken over"]


def test_a_lease_its_task_passed_on_during_a_renewal_is_not_reported(leased, caplog) -> None:
    lease = leased()
    beat = Heartbeat()
    with beat.holding(lease):
        pass
    Run.objects.filter(pk=lease.run_id).update(lease_token=F("lease_token") + 1)  # the next task
    with caplog.at_level(logging.WARNING, "agent_core.runner.heartbeat"):
        # The renewal of what was held when the period ended, after the task let go of it: the
        # race is too short to hit from outside, so the renewal is called as the thread calls it.
        beat._renew({0: lease})
    assert caplog.records == []


def test_a_heartbeat_whose_connection_died_reconnects_at_the_next_period(leased, caplog) -> None:
    lease = leased()
    with Heartbeat().holding(lease):
        time.sleep(PERIODS)
        with connection.cursor() as cursor:  # PostgreSQL ends the heartbeat's session
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND query LIKE %s",
                [RENEWAL],
            )
        ended = deadline(lease)
        time.sleep(2 * PERIODS)  # one renewal fails, the next reconnects
        assert deadline(lease) > ended
    assert "the heartbeat failed" in caplog.text


def test_an_idle_heartbeat_closes_its_database_connection(leased) -> None:
    with Heartbeat().holding(leased()):
        time.sleep(PERIODS)
        assert renewing_connections() == 1
    time.sleep(PERIODS)
    assert renewing_connections() == 0


def test_a_forked_worker_process_starts_a_thread_of_its_own(leased) -> None:
    lease = leased()
    with heartbeat.holding(lease):  # the parent's thread runs
        reader, writer = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child (a prefork pool's): its first task starts its own thread
            with heartbeat.holding(lease):
                os.write(writer, b"%d" % len(heartbeat_threads()))
            os._exit(0)
        os.waitpid(pid, 0)
    assert os.read(reader, 8) == b"1"
