"""SPEC §17 on the durable runner, with real Celery workers: a proposal decided later runs
exactly once, even when its worker is killed inside it; a superseded one never runs, a drifted one
is refused; the thread goes on meanwhile; a skipped question resumes its run."""

from __future__ import annotations

import pytest

from agent_core.choices import CallStatus, RunStatus
from agent_core.engine import runs
from agent_core.gate import text_decision
from agent_core.models import Message, Run, Thread, ToolCall
from approvals import services as port
from demo.models import FollowUp
from tests.approvals.test_independent import follow_up
from tests.conftest import ALICE, settled, wait_for

from .conftest import Cluster, assert_frames_gapless, idle_in_transaction, start

LONG = "600"  # seconds a paused worker would wait; it is killed long before


def proposed(cluster: Cluster, message: str, thread_id: str | None = None) -> ToolCall:
    """Start a turn of the demo agent proposing a follow-up; once it completed, its proposal."""
    run = start(message, agent="support") if thread_id is None else _on(thread_id, message)
    wait_for("the turn to complete", settled(run.pk, RunStatus.COMPLETED), cluster)
    [call] = ToolCall.objects.filter(run=run)
    assert isinstance(call.result, dict)
    return ToolCall.objects.get(pk=call.result["proposal_id"])


def _on(thread_id: str, message: str) -> Run:
    return runs.start_run(agent="support", message=message, actor=ALICE, thread_id=thread_id)


pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("shop")]


def test_a_skipped_question_resumes_its_run_on_a_worker(cluster: Cluster) -> None:
    cluster.worker()
    run = start('/call ask_user {"question": "Which order?"}', agent="support")
    wait_for("the run to park", settled(run.pk, RunStatus.WAITING), cluster)
    [call] = ToolCall.objects.filter(run=run)
    assert port.skip(call.pk, actor=ALICE).result == port.Result.APPLIED
    wait_for("the run to complete", settled(run.pk, RunStatus.COMPLETED), cluster)
    call.refresh_from_db()
    assert (call.status, call.reason) == (CallStatus.REJECTED, "skipped")
    [told] = Message.objects.get(run=run, role="tool").content
    assert told["output"].startswith("The user skipped this question")
    assert_frames_gapless(run.pk)


def test_a_proposal_decided_later_runs_once_though_its_worker_dies_inside_it(
    cluster: Cluster,
) -> None:
    cluster.beat()
    first = cluster.worker(DEMO_FOLLOW_UP_DELAY=LONG)
    proposal = proposed(cluster, follow_up())
    # The thread goes on while it waits.
    later = _on(proposal.thread_id, "anything else?")
    wait_for("the next turn to complete", settled(later.pk, RunStatus.COMPLETED), cluster)
    assert ToolCall.objects.get(pk=proposal.pk).status == CallStatus.PENDING_APPROVAL
    port.approve(proposal.pk, actor=ALICE)
    wait_for("the follow-up's open transaction", lambda: idle_in_transaction() > 0, cluster)
    cluster.kill(first)
    assert FollowUp.objects.count() == 0
    cluster.worker()
    wait_for("the execution to end", settled(proposal.run_id, RunStatus.COMPLETED), cluster)
    proposal.refresh_from_db()
    assert proposal.status == CallStatus.SUCCEEDED and proposal.attempts == 1
    assert FollowUp.objects.get().tool_call_id == proposal.pk
    assert Message.objects.filter(run_id=proposal.run_id).count() == 1
    assert_frames_gapless(proposal.run_id)


def test_a_superseded_proposal_never_runs_and_a_drifted_one_is_refused(cluster: Cluster) -> None:
    cluster.worker()
    older = proposed(cluster, follow_up(send_on="2026-12-24"))
    newer = proposed(cluster, follow_up(send_on="2026-12-27"), older.thread_id)
    wait_for("the older run to end", settled(older.run_id, RunStatus.COMPLETED), cluster)
    assert ToolCall.objects.get(pk=older.pk).status == CallStatus.SUPERSEDED
    with pytest.raises(port.AlreadyDecided):
        port.approve(older.pk, actor=ALICE)
    ToolCall.objects.filter(pk=newer.pk).update(args={"order_id": "A-1001", "send_on": "soon"})
    port.approve(newer.pk, actor=ALICE)
    wait_for("the execution to end", settled(newer.run_id, RunStatus.COMPLETED), cluster)
    newer.refresh_from_db()
    assert newer.status == CallStatus.REFUSED and newer.reason.startswith("proposal_drift")
    assert Run.objects.get(pk=newer.run_id).error_code == "proposal_drift"
    assert FollowUp.objects.count() == 0


def test_yes_in_the_chat_decides_a_proposal_that_a_worker_executes(cluster: Cluster) -> None:
    cluster.worker()
    proposal = proposed(cluster, follow_up())
    thread = Thread.objects.get(pk=proposal.thread_id)
    reply = text_decision(ALICE, thread, "yes")
    assert reply is not None and reply.run_id == proposal.run_id
    wait_for("the execution to end", settled(proposal.run_id, RunStatus.COMPLETED), cluster)
    proposal.refresh_from_db()
    assert (proposal.status, proposal.decided_via) == (CallStatus.SUCCEEDED, "text")
    assert FollowUp.objects.get().tool_call_id == proposal.pk
