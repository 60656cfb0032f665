"""Cancel in process: cascade to child runs, and the sweeper settling an abandoned cancel."""

from __future__ import annotations

import pytest
from django.test import override_settings

from agent_core.choices import CallStatus, RunStatus
from agent_core.engine import cancel
from agent_core.exceptions import NotAllowed, NotFound
from agent_core.models import Run, StreamFrame, Thread
from agent_core.runner.abort import CancelWatch
from agent_core.runner.sweep import sweep
from tests.conftest import ALICE, BOB, FRAN, REFUND, calls_of

pytestmark = pytest.mark.django_db


def _child_of(parent: Run, status: RunStatus) -> Run:
    thread = Thread.objects.create(owner_ref=ALICE.ref, agent="support")
    child = Run.objects.create(
        thread=thread, agent="support", actor_ref=ALICE.ref, runner="inline", parent_run=parent
    )
    Run.objects.filter(pk=child.pk).update(status=status)
    Thread.objects.filter(pk=thread.pk).update(active_run=child)
    return child


def test_cancel_cascades_to_child_runs(turn, decide):
    parent = turn(REFUND)
    child = _child_of(parent, RunStatus.WAITING)
    done = _child_of(parent, RunStatus.COMPLETED)
    decide(cancel.request_cancel, parent.pk, actor=ALICE)
    for run in (parent, child, done):
        run.refresh_from_db()
    assert parent.status == child.status == RunStatus.CANCELLED
    assert done.status == RunStatus.COMPLETED
    assert [c.status for c in calls_of(parent)] == [CallStatus.CANCELLED]
    assert Thread.objects.get(pk=child.thread_id).active_run_id is None


def test_a_driven_run_is_marked_cancelling_and_the_sweeper_settles_it_if_the_driver_died(turn):
    run = turn(REFUND)
    # Pretend a driver holds it mid-step, then dies without reaching a safe point.
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING,
        lease_owner="dead-worker",
        lease_expires_at=run.created_at.replace(year=2100),
    )
    assert cancel.request_cancel(run.pk, actor=ALICE).status == RunStatus.CANCELLING
    assert cancel.request_cancel(run.pk, actor=ALICE).status == RunStatus.CANCELLING
    sweep()
    assert Run.objects.get(pk=run.pk).status == RunStatus.CANCELLING  # the lease still holds
    Run.objects.filter(pk=run.pk).update(lease_expires_at=run.created_at)
    sweep()
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
    kinds = list(StreamFrame.objects.filter(run=run).order_by("seq").values_list("kind", flat=True))
    assert kinds[-2:] == ["cancelled", "finish"]


def test_the_abort_signal_sees_a_cancel_requested_by_any_process(turn):
    run = turn(REFUND)
    with override_settings(AGENT={"AGENTS": ["demo.agents.support_agent"], "CANCEL_POLL_MS": 0}):
        watch = CancelWatch(run.pk)
        assert not watch.is_set() and not watch.wait(0.01)
        Run.objects.filter(pk=run.pk).update(cancel_requested=True)  # as another process would
        assert watch.is_set() and watch.wait(0.01)


def test_cancel_is_authorized_by_the_access_rule_and_refused_changes_nothing(turn, settings):
    settings.APPROVALS = {**settings.APPROVALS, "RULES": {"issue_refund": {"approver": "finance"}}}
    run = turn(REFUND)  # alice's, waiting on finance
    with pytest.raises(NotFound):
        cancel.request_cancel(run.pk, actor=BOB)  # may not see it: unknown
    with pytest.raises(NotAllowed):
        cancel.request_cancel(run.pk, actor=FRAN)  # sees it (approves it), may not cancel it
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING and not run.cancel_requested


def test_cancelling_a_finished_run_answers_its_status_unchanged(turn):
    run = turn(REFUND)
    assert cancel.request_cancel(run.pk, actor=ALICE).status == RunStatus.CANCELLED
    assert cancel.request_cancel(run.pk, actor=ALICE).status == RunStatus.CANCELLED
