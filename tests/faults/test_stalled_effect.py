"""A worker frozen (SIGSTOP) inside a tool with ``recover()``, after its send went to the provider
and before the provider confirmed it, then resumed after another driver took the run over: one
send, not two (SPEC §20). The lease fences the frozen worker's record; the effect is fenced at
its target, by the idempotency key the demo mailer will not take twice."""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Any

import pytest
from django.db import OperationalError, connection

from agent_core.choices import CallStatus
from agent_core.engine import outages
from agent_core.runner.inline import InlineRunner
from agent_core.runner.sweep import stale_runs
from demo.models import MailerSend
from tests.conftest import calls_of, wait_for
from tests.faults.conftest import lease_runs_out
from tests.processes import GUARD_SECONDS, MANAGE, ROOT, django_env

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

DRIVE = "from agent_core.runner.inline import InlineRunner; InlineRunner(workers=0).drive({run!r})"
# The worker's send written and not yet committed: another session holds the write lock an
# INSERT takes on the mailer's table, until its transaction ends.
SENDING = (
    "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation"
    " WHERE c.relname = %(table)s AND l.mode = 'RowExclusiveLock' AND l.pid <> pg_backend_pid()"
)


def _sending() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(SENDING, {"table": MailerSend._meta.db_table})
        return bool(cursor.fetchone()[0])


def _drive_here(run_id: str) -> None:
    """Drive the run in this process; the frozen send's key may hold its send up (lock timeout):
    a lost database to the runner, which leaves the run to the sweeper."""
    try:
        InlineRunner(workers=0).drive(run_id)
    except OperationalError as exc:
        assert outages.database_lost(exc), exc


def test_a_worker_frozen_before_its_send_is_confirmed_sends_once(
    approved: Any, settings: Any
) -> None:
    run = approved('/call mail_slowly {"campaign_id": "spring-sale"}')
    frozen = subprocess.Popen(
        [*MANAGE, "shell", "--no-imports", "-c", DRIVE.format(run=run.pk)],
        cwd=ROOT,
        env=django_env(AIRLOCK_TEST_LEASE_SECONDS="1", AIRLOCK_TEST_MAILER_CONFIRM="3"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for("the worker's send to be in flight", _sending)
        os.kill(frozen.pid, signal.SIGSTOP)
        wait_for("the frozen worker's lease to run out", lambda: run.pk in stale_runs())
        settings.AGENT = {**settings.AGENT, "LOCK_TIMEOUT_SECONDS": 0.5}
        connection.close()  # this process's next connection waits 0.5 s for a lock
        _drive_here(run.pk)  # the sweeper's driver: recover() sees no send yet, and sends
    finally:
        os.kill(frozen.pid, signal.SIGCONT)
    output, _ = frozen.communicate(timeout=GUARD_SECONDS)
    assert frozen.returncode == 0, output
    lease_runs_out(run)
    _drive_here(run.pk)  # recover() finds the one send
    [call] = calls_of(run)
    assert call.status == CallStatus.SUCCEEDED
    assert MailerSend.objects.filter(idempotency_key=f"airlock-{call.pk}").count() == 1
