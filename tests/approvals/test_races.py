"""Races with real threads on committed transactions: a decision against the expiry sweep, a
waiting run whose deadline passes while no process is alive, and a decision waiting for the lock
of a run whose holder decides the call."""

from __future__ import annotations

import random
import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from agent_core.choices import CallStatus, RunStatus
from agent_core.engine import runs
from agent_core.engine.dispatch import set_runner
from agent_core.exceptions import AlreadyDecided
from agent_core.models import Run, StreamFrame, ToolCall
from agent_core.runner.inline import InlineRunner
from agent_core.runner.sweep import sweep
from approvals import services as port
from approvals.exceptions import ApprovalExpired
from approvals.models import Action, DecisionAttempt
from demo.models import Refund
from tests.conftest import ALICE, REFUND, WAIT_SECONDS, calls_of, settled, wait_for


def waiting_call() -> ToolCall:
    run = runs.start_run(agent="support", message=REFUND, actor=ALICE)
    wait_for("the run to wait", settled(run.pk, RunStatus.WAITING))
    [call] = calls_of(run)
    return call


def race(call: ToolCall, delay: float) -> str:
    """Approve ``delay`` s after a sweeper starts hammering ``expire_due``; what came of it."""
    barrier = threading.Barrier(2)
    outcome: list[str] = []

    def decide() -> None:
        barrier.wait()
        threading.Event().wait(delay)
        try:
            outcome.append(port.approve(call.pk, actor=ALICE).result)
        except ApprovalExpired:
            outcome.append("expired")
        finally:
            connection.close()

    def sweeper() -> None:
        barrier.wait()
        try:
            while ToolCall.objects.get(pk=call.pk).status == CallStatus.PENDING_APPROVAL:
                port.expire_due()
        finally:
            connection.close()

    threads = [threading.Thread(target=decide), threading.Thread(target=sweeper)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    [result] = outcome
    return result


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_decision_racing_the_expiry_has_one_outcome_recorded_once(shop, threaded_runner):
    calls = [waiting_call() for _ in range(6)]
    for i, call in enumerate(calls):
        # Each round lands the approve a little before, at, or after the deadline.
        ToolCall.objects.filter(pk=call.pk).update(
            expires_at=timezone.now() + timedelta(milliseconds=150)
        )
        outcome = race(call, max(0.0, 0.05 * i + random.uniform(-0.02, 0.02)))
        wait_for(
            "the run to complete",
            settled(call.run_id, RunStatus.COMPLETED),
        )
        call.refresh_from_db()
        frames = StreamFrame.objects.filter(run_id=call.run_id, kind="approval-settled")
        applied = DecisionAttempt.objects.filter(tool_call_id=call.pk, outcome="applied")
        assert frames.count() == 1 and applied.count() == 1
        if outcome == "applied":
            assert call.status == CallStatus.SUCCEEDED
            assert applied.get().action == Action.APPROVE
            assert Refund.objects.filter(tool_call_id=call.pk).count() == 1
        else:
            assert outcome == "expired" and call.status == CallStatus.EXPIRED
            assert applied.get().action == Action.EXPIRE
            assert Refund.objects.filter(tool_call_id=call.pk).count() == 0
            assert frames.get().data["status"] == "expired"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_deadline_that_passes_with_no_process_alive_is_kept_by_the_next_sweep(
    shop, threaded_runner
):
    call = waiting_call()
    ToolCall.objects.filter(pk=call.pk).update(expires_at=timezone.now() + timedelta(seconds=60))
    threaded_runner.shutdown()
    set_runner(None)  # the process is gone; the deadline passes while nothing runs
    ToolCall.objects.filter(pk=call.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    restarted = InlineRunner(workers=2)
    set_runner(restarted)
    try:
        sweep(restarted)  # what the next process does first when it starts
        wait_for(
            "the run to complete",
            settled(call.run_id, RunStatus.COMPLETED),
        )
        call.refresh_from_db()
        assert call.status == CallStatus.EXPIRED and Refund.objects.count() == 0
        with pytest.raises(ApprovalExpired):
            port.approve(call.pk, actor=ALICE)
    finally:
        restarted.shutdown()


@pytest.mark.django_db(transaction=True)
def test_a_decision_waiting_for_the_runs_lock_reads_the_call_its_holder_committed(
    shop, threaded_runner
):
    """The decision's one locking statement (``sql.lock_call``) takes the run before the call,
    the order every writer takes them: while it waits for the run, the call is free for the
    run's holder to write. It then reads the call as that holder committed it, not as its own
    snapshot saw it, so a call rejected meanwhile is a conflict, not a second decision."""
    call = waiting_call()
    holding, release = threading.Event(), threading.Event()
    outcome: list[str] = []

    def holder() -> None:
        try:
            with transaction.atomic():
                Run.objects.select_for_update().get(pk=call.run_id)
                holding.set()
                release.wait(WAIT_SECONDS)
                ToolCall.objects.filter(pk=call.pk).update(
                    status=CallStatus.REJECTED,
                    decided_by_ref="user:bob",
                    decided_via="web",
                    decided_at=timezone.now(),
                )
        finally:
            connection.close()

    def decider() -> None:
        holding.wait(WAIT_SECONDS)
        try:
            outcome.append(port.approve(call.pk, actor=ALICE).result)
        except AlreadyDecided:
            outcome.append("conflict")
        finally:
            connection.close()

    threads = [threading.Thread(target=holder), threading.Thread(target=decider)]
    for t in threads:
        t.start()
    wait_for("the decision to wait for the run's lock", lambda: _waiting_for_a_lock() == 1)
    with transaction.atomic():  # the call is not locked: this would fail at once if it were
        ToolCall.objects.select_for_update(nowait=True).get(pk=call.pk)
    release.set()
    for t in threads:
        t.join()
    assert outcome == ["conflict"]
    call.refresh_from_db()
    assert (call.status, call.decided_by_ref) == (CallStatus.REJECTED, "user:bob")


def _waiting_for_a_lock() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return int(cursor.fetchone()[0])
