"""A tool step's record takes its run's lock in the statement that writes the call
(``sql.FINISH_CALL_LOCKING``): a decision on another call of the run, committed while that
statement waited for the lock, is what the record plans from — not the call as the statement's
snapshot saw it before the wait. Real threads on committed transactions."""

from __future__ import annotations

import threading

import pytest
from django.db import transaction

from agent_core import calls, ids, leases, runs
from agent_core.choices import CallStatus, RunStatus
from agent_core.dispatch import Next
from agent_core.journal import Recorded
from agent_core.leases import lock_run
from agent_core.models import Run, ToolCall
from tests.agent_core.test_turn_races import _in_thread, _waits_for_a_lock
from tests.conftest import ALICE, REFUND, WAIT_SECONDS, calls_of, wait_for


@pytest.mark.django_db(transaction=True)
def test_a_record_plans_from_a_decision_committed_while_it_waited_for_the_lock(shop, sync_runner):
    # A run whose step proposed a refund (pending a person) and a read (approved), driven by a
    # lease that is about to record the read.
    run = runs.start_run(agent="support", message=REFUND, actor=ALICE)
    [refund] = calls_of(run)
    assert refund.status == CallStatus.PENDING_APPROVAL
    read = ToolCall.objects.get(pk=refund.pk)
    read.pk, read.position, read.status = ids.tool_call_id(), refund.position + 1, "approved"
    read.tool_name, read.kind, read.args = "lookup_order", "read", {"order_id": "A-1001"}
    read._state.adding = True
    read.save()
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)
    lease = leases.acquire(run.pk, "test-driver")
    assert lease is not None
    holding, approved = threading.Event(), threading.Event()
    decider_pid: list[int] = []
    recorder_pid: list[int] = []
    decider_done, recorder_done = threading.Event(), threading.Event()
    recorded: list[Recorded] = []

    def decide() -> None:
        """A decision's write: the refund approved under the run's lock."""
        with transaction.atomic():
            lock_run(run.pk)
            ToolCall.objects.filter(pk=refund.pk).update(status=CallStatus.APPROVED)
            holding.set()
            approved.wait(WAIT_SECONDS)

    def record() -> None:
        with transaction.atomic():
            recorded.append(
                calls.finish_call(lease, read.pk, result={}, expected=CallStatus.APPROVED)
            )

    decider = _in_thread(decide, decider_pid, decider_done)
    holding.wait(WAIT_SECONDS)
    recorder = _in_thread(record, recorder_pid, recorder_done)
    wait_for("the record to wait for the run's lock", lambda: _waits_for_a_lock(recorder_pid))
    approved.set()
    decider.join(WAIT_SECONDS)
    recorder.join(WAIT_SECONDS)
    assert decider_done.is_set() and recorder_done.is_set() and len(recorded) == 1
    # The refund is approved: the run goes on to run it, rather than park on a pending call.
    assert recorded[0].next == Next.TOOL
    assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING
