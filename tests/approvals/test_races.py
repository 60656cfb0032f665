"""Races with real threads on committed transactions: a decision against the expiry sweep, and a
waiting run whose deadline passes while no process is alive."""

from __future__ import annotations

import random
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from agent_core import runs
from agent_core.choices import CallStatus, RunStatus
from agent_core.dispatch import set_runner
from agent_core.models import StreamFrame, ToolCall
from agent_core.runner.inline import InlineRunner
from agent_core.runner.sweep import sweep
from approvals import services as port
from approvals.exceptions import ApprovalExpired
from approvals.models import Action, DecisionAttempt
from demo.models import Refund
from tests.conftest import ALICE, REFUND, calls_of, settled, wait_for


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
            outcome.append(port.approve(call.pk, actor=ALICE))
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
