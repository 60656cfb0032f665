"""What a driver plans from, once it holds the run's lock, is what is committed then: a decision
on another call of the run, committed while the driver's statement waited for that lock, is
what it plans from — not the call as the statement's snapshot saw it before the wait.

- A tool step's record takes the run's lock in the statement that writes the call
  (``sql.FINISH_CALL_LOCKING``): the statement's own read of the other calls would be stale, so
  it re-reads them under the lock.
- A claim takes the lease (``sql.ACQUIRE_LEASE``, which waits for the lock) and reads the run in
  a statement of its own (``sql.READ_RUN_LOCKED``): a read riding on the lease's ``UPDATE`` would
  see the calls as they were before the wait.

Real threads on committed transactions."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import transaction

from agent_core import ids
from agent_core.choices import CallStatus, RunStatus
from agent_core.engine import calls, leases, runs
from agent_core.engine.dispatch import NextStep
from agent_core.engine.leases import Claim, lock_run
from agent_core.models import Run, ToolCall
from agent_core.runner import loop
from agent_core.runner.plan import RunTool
from tests.agent_core.test_turn_races import _in_thread, _waits_for_a_lock
from tests.conftest import ALICE, REFUND, WAIT_SECONDS, calls_of, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def _refund_and_read(**running: Any) -> tuple[Run, ToolCall, ToolCall]:
    """A running run (``running``: more of its columns) whose step proposed a refund (pending a
    person) and a read (approved)."""
    run = runs.start_run(agent="support", message=REFUND, actor=ALICE)
    [refund] = calls_of(run)
    assert refund.status == CallStatus.PENDING_APPROVAL
    read = ToolCall.objects.get(pk=refund.pk)
    read.pk, read.position, read.status = ids.tool_call_id(), refund.position + 1, "approved"
    read.tool_name, read.kind, read.args = "lookup_order", "read", {"order_id": "A-1001"}
    read._state.adding = True
    read.save()
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, **running)
    return run, refund, read


def _while_the_refund_is_approved(run: Run, refund: ToolCall, driver: Callable[[], Any]) -> Any:
    """What ``driver`` returns when it starts while a decision holds the run's lock, having
    approved the refund, and the decision commits once ``driver`` waits for that lock."""
    holding, approved = threading.Event(), threading.Event()
    decider_pid: list[int] = []
    driver_pid: list[int] = []
    decider_done, driver_done = threading.Event(), threading.Event()
    returned: list[Any] = []

    def decide() -> None:
        """A decision's write: the refund approved under the run's lock."""
        with transaction.atomic():
            lock_run(run.pk)
            ToolCall.objects.filter(pk=refund.pk).update(status=CallStatus.APPROVED)
            holding.set()
            approved.wait(WAIT_SECONDS)

    decider = _in_thread(decide, decider_pid, decider_done)
    holding.wait(WAIT_SECONDS)
    drives = _in_thread(lambda: returned.append(driver()), driver_pid, driver_done)
    wait_for("the driver to wait for the run's lock", lambda: _waits_for_a_lock(driver_pid))
    approved.set()
    decider.join(WAIT_SECONDS)
    drives.join(WAIT_SECONDS)
    assert decider_done.is_set() and driver_done.is_set() and len(returned) == 1
    return returned[0]


def test_a_record_plans_from_a_decision_committed_while_it_waited_for_the_lock(shop, sync_runner):
    # The lease is about to record the read.
    run, refund, read = _refund_and_read()
    lease = leases.acquire(run.pk, "test-driver")
    assert lease is not None

    def record() -> Any:
        with transaction.atomic():
            return calls.finish_call(lease, read.pk, result={}, expected=CallStatus.APPROVED)

    recorded = _while_the_refund_is_approved(run, refund, record)
    # The refund is approved: the run goes on to run it, rather than park on a pending call.
    assert recorded.next == NextStep.TOOL
    assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING


def test_a_claim_plans_from_a_decision_committed_while_it_waited_for_the_lock(shop, sync_runner):
    # The lease was handed on between steps: the next step's driver is about to claim the run.
    run, refund, _ = _refund_and_read(lease_owner="")
    claim = Claim(run.pk, "test-driver")
    found = _while_the_refund_is_approved(run, refund, lambda: loop.claim_step(claim))
    assert isinstance(found, tuple)
    opened = found[1]
    assert isinstance(opened, loop.Opened)
    # Planned from the approved refund (it comes first), not the pending one the snapshot saw.
    assert {call.pk: call.status for call in opened.calls}[refund.pk] == CallStatus.APPROVED
    assert isinstance(opened.step, RunTool) and opened.step.call.pk == refund.pk
