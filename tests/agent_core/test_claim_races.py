"""A claim plans from what is committed once it holds the run's lock: a decision on a call of
the run, committed while the claim waited for that lock, is what its step is planned from. The
lease's ``UPDATE`` sees the run's newest row after the wait, but a read riding on it would see
the calls as its snapshot had them before the wait: the run is read by a statement of its own.
Real threads on committed transactions."""

from __future__ import annotations

import threading

import pytest
from django.db import transaction

from agent_core import ids, runs
from agent_core.choices import CallStatus, RunStatus
from agent_core.leases import Claim, lock_run
from agent_core.models import Run, ToolCall
from agent_core.runner import loop
from agent_core.runner.plan import RunTool
from tests.agent_core.test_turn_races import _in_thread, _waits_for_a_lock
from tests.conftest import ALICE, REFUND, WAIT_SECONDS, calls_of, wait_for


@pytest.mark.django_db(transaction=True)
def test_a_claim_plans_from_a_decision_committed_while_it_waited_for_the_lock(shop, sync_runner):
    # A run whose step proposed a refund (pending a person) and a read (approved), its lease
    # handed on between steps: the next step's driver is about to claim it.
    run = runs.start_run(agent="support", message=REFUND, actor=ALICE)
    [refund] = calls_of(run)
    assert refund.status == CallStatus.PENDING_APPROVAL
    read = ToolCall.objects.get(pk=refund.pk)
    read.pk, read.position, read.status = ids.tool_call_id(), refund.position + 1, "approved"
    read.tool_name, read.kind, read.args = "lookup_order", "read", {"order_id": "A-1001"}
    read._state.adding = True
    read.save()
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, lease_owner="")
    holding, approved = threading.Event(), threading.Event()
    decider_pid: list[int] = []
    claimer_pid: list[int] = []
    decider_done, claimer_done = threading.Event(), threading.Event()
    claimed: list[object] = []

    def decide() -> None:
        """A decision's write: the refund approved under the run's lock."""
        with transaction.atomic():
            lock_run(run.pk)
            ToolCall.objects.filter(pk=refund.pk).update(status=CallStatus.APPROVED)
            holding.set()
            approved.wait(WAIT_SECONDS)

    def claim() -> None:
        claimed.append(loop.claim_step(Claim(run.pk, "test-driver")))

    decider = _in_thread(decide, decider_pid, decider_done)
    holding.wait(WAIT_SECONDS)
    claimer = _in_thread(claim, claimer_pid, claimer_done)
    wait_for("the claim to wait for the run's lock", lambda: _waits_for_a_lock(claimer_pid))
    approved.set()
    decider.join(WAIT_SECONDS)
    claimer.join(WAIT_SECONDS)
    assert decider_done.is_set() and claimer_done.is_set() and len(claimed) == 1
    found = claimed[0]
    assert isinstance(found, tuple)
    opened = found[1]
    assert isinstance(opened, loop.Opened)
    # Planned from the approved refund (it comes first), not the pending one the snapshot saw.
    assert {call.pk: call.status for call in opened.calls}[refund.pk] == CallStatus.APPROVED
    assert isinstance(opened.step, RunTool) and opened.step.call.pk == refund.pk
