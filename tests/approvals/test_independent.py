"""Independent proposals (SPEC §17) on the inline runner, in process: the turn goes on while a
proposal waits; a decision executes it once, apart; replacement keys; drift; cancel; remember."""

from __future__ import annotations

import json

import pytest

from agent_core.agents import get_agent
from agent_core.choices import CallStatus, RunKind, RunStatus
from agent_core.conversation import turns
from agent_core.engine import cancel, transcript
from agent_core.models import Message, Run, StreamFrame, ToolCall
from approvals import services as port
from approvals.models import RememberedApproval
from demo.models import FollowUp
from tests.approvals.rest import actor, get
from tests.conftest import ALICE, REFUND, calls_of

pytestmark = pytest.mark.django_db


def follow_up(order_id: str = "A-1001", send_on: str = "2026-12-24") -> str:
    args = {"order_id": order_id, "send_on": send_on}
    return f"/call schedule_follow_up {json.dumps(args)}"


def proposal_of(run: Run) -> ToolCall:
    """The proposal the turn's one call made (the call the model read points at it)."""
    [call] = calls_of(run)
    result = call.result
    assert call.status == CallStatus.SUCCEEDED and isinstance(result, dict)
    assert result["executed"] is False
    return ToolCall.objects.select_related("run").get(pk=result["proposal_id"])


def test_the_turn_goes_on_and_ends_while_its_proposal_waits(turn):
    run = turn(follow_up())
    assert run.status == RunStatus.COMPLETED
    [call] = calls_of(run)
    proposal = proposal_of(run)
    assert call.result == {"proposal_id": proposal.pk, "status": "pending", "executed": False}
    assert (proposal.status, proposal.run.kind, proposal.run.status) == (
        CallStatus.PENDING_APPROVAL,
        RunKind.PROPOSAL,
        RunStatus.WAITING,
    )
    assert proposal.requester_ref == ALICE.ref and proposal.thread_id == run.thread_id
    kinds = list(
        StreamFrame.objects.filter(run=proposal.run).order_by("seq").values_list("kind", flat=True)
    )
    assert kinds == ["tool-input-available", "approval-requested"]
    # The thread is free: the next turns start and end while the proposal waits.
    later = turn("hello again", thread_id=run.thread_id)
    assert later.status == RunStatus.COMPLETED
    assert ToolCall.objects.get(pk=proposal.pk).status == CallStatus.PENDING_APPROVAL
    assert FollowUp.objects.count() == 0


def test_a_decision_executes_it_once_apart_and_the_next_turn_reads_the_outcome(turn, decide):
    run = turn(follow_up())
    proposal = proposal_of(run)
    assert decide(port.approve, proposal.pk, actor=ALICE).result == port.Result.APPLIED
    proposal.refresh_from_db()
    assert proposal.status == CallStatus.SUCCEEDED and proposal.attempts == 1
    assert Run.objects.get(pk=proposal.run_id).status == RunStatus.COMPLETED
    assert Run.objects.get(pk=run.pk).status == RunStatus.COMPLETED  # never resumed
    [done] = FollowUp.objects.all()
    assert done.tool_call_id == proposal.pk
    [told] = Message.objects.filter(run_id=proposal.run_id)
    assert told.role == "user"
    [part] = told.content
    assert part["proposal"] == {"proposal_id": proposal.pk, "status": "succeeded"}
    assert "approved by user:alice and executed" in part["text"]
    # No model step of its own; the next turn's request carries it.
    assert not Run.objects.get(pk=proposal.run_id).steps.filter(name="llm:1").exists()
    assert decide(port.approve, proposal.pk, actor=ALICE).result == port.Result.UNCHANGED
    later = turn("what happened?", thread_id=run.thread_id)
    request = transcript.build_request(later, get_agent("support"))
    texts = [p.get("text", "") for m in request.messages for p in m.parts]
    assert any(f"Proposal {proposal.pk}" in t for t in texts)
    assert FollowUp.objects.count() == 1


def test_a_rejected_proposal_tells_the_thread_and_runs_nothing(turn, decide):
    proposal = proposal_of(turn(follow_up()))
    decide(port.reject, proposal.pk, actor=ALICE, reason="not now")
    [told] = Message.objects.filter(run_id=proposal.run_id)
    assert "was rejected by user:alice: not now" in told.content[0]["text"]
    assert Run.objects.get(pk=proposal.run_id).status == RunStatus.COMPLETED
    assert FollowUp.objects.count() == 0


def test_a_newer_proposal_with_the_same_key_supersedes_the_pending_one(turn, decide):
    run = turn(follow_up("A-1001", "2026-12-24"))
    older = proposal_of(run)
    other = proposal_of(turn(follow_up("A-1002"), thread_id=run.thread_id))
    newer = proposal_of(turn(follow_up("A-1001", "2026-12-27"), thread_id=run.thread_id))
    older.refresh_from_db()
    assert (older.status, older.decided_via) == (CallStatus.SUPERSEDED, "replacement")
    assert older.reason == f"superseded by {newer.pk}"
    settled = StreamFrame.objects.get(run_id=older.run_id, kind="approval-settled")
    assert settled.data["status"] == "superseded"
    assert Run.objects.get(pk=older.run_id).status == RunStatus.COMPLETED
    assert not Message.objects.filter(run_id=older.run_id).exists()
    assert ToolCall.objects.get(pk=other.pk).status == CallStatus.PENDING_APPROVAL  # other key
    with pytest.raises(port.AlreadyDecided):
        decide(port.approve, older.pk, actor=ALICE)
    decide(port.approve, newer.pk, actor=ALICE)
    assert [str(f.send_on) for f in FollowUp.objects.all()] == ["2026-12-27"]


def test_an_approved_proposal_is_not_superseded(turn, decide, settings):
    run = turn(follow_up())
    first = proposal_of(run)
    decide(port.approve, first.pk, actor=ALICE)
    second = proposal_of(turn(follow_up(send_on="2026-12-31"), thread_id=run.thread_id))
    assert ToolCall.objects.get(pk=first.pk).status == CallStatus.SUCCEEDED
    assert ToolCall.objects.get(pk=second.pk).status == CallStatus.PENDING_APPROVAL


def test_a_drifted_proposal_is_refused_and_nothing_runs(turn, decide):
    proposal = proposal_of(turn(follow_up()))
    # The tool's schema changed since (simulated: the stored args no longer fit it).
    ToolCall.objects.filter(pk=proposal.pk).update(args={"order_id": "A-1001", "send_on": "soon"})
    decide(port.approve, proposal.pk, actor=ALICE, remember=True)
    proposal.refresh_from_db()
    assert proposal.status == CallStatus.REFUSED
    assert proposal.reason.startswith("proposal_drift: its arguments no longer fit")
    execution = Run.objects.get(pk=proposal.run_id)
    assert (execution.status, execution.error_code) == (RunStatus.COMPLETED, "proposal_drift")
    assert FollowUp.objects.count() == 0
    assert not RememberedApproval.objects.exists()  # a remember waits for an execution


def test_a_proposal_whose_requester_is_gone_is_refused(turn, decide, people):
    alice = people["alice"]
    proposal = proposal_of(turn(follow_up(), actor=actor(alice)))
    approver = actor(alice)
    alice.is_active = False
    alice.save()
    decide(port.approve, proposal.pk, actor=approver)
    proposal.refresh_from_db()
    assert proposal.status == CallStatus.REFUSED
    assert "no longer an active user" in proposal.reason
    assert FollowUp.objects.count() == 0


def test_remember_on_a_proposal_takes_effect_once_it_ran(turn, decide):
    proposal = proposal_of(turn(follow_up()))
    decide(port.approve, proposal.pk, actor=ALICE, remember=True)
    [grant] = RememberedApproval.objects.all()
    assert grant.source_tool_call_id == proposal.pk and grant.granted_by_ref == ALICE.ref


def test_a_later_turns_cancel_never_cancels_an_earlier_proposal(turn, decide):
    run = turn(follow_up())
    proposal = proposal_of(run)
    parked = turn(REFUND, thread_id=run.thread_id)
    assert parked.status == RunStatus.WAITING
    decide(cancel.request_cancel, parked.pk, actor=ALICE)
    assert Run.objects.get(pk=parked.pk).status == RunStatus.CANCELLED
    assert ToolCall.objects.get(pk=proposal.pk).status == CallStatus.PENDING_APPROVAL
    decide(port.approve, proposal.pk, actor=ALICE)
    assert FollowUp.objects.count() == 1


def test_a_proposal_is_a_pending_call_in_the_inbox_and_the_rest_api(turn, people, post):
    alice = people["alice"]
    proposal = proposal_of(turn(follow_up(), actor=actor(alice)))
    status, page = get(alice, "/agent/approvals/pending")
    assert status == 200 and [row["tool_call_id"] for row in page["results"]] == [proposal.pk]
    status, data = post(alice, "/agent/tool-call/approve", {"tool_call_id": proposal.pk})
    assert (status, data["outcome"]) == (200, "applied")
    assert FollowUp.objects.get().tool_call_id == proposal.pk


def test_waiting_proposals_do_not_count_as_concurrent_runs(turn, settings):
    settings.AGENT = {**settings.AGENT, "QUOTAS": {"CONCURRENT_RUNS": 1}}
    run = turn(follow_up("A-1001"))
    proposal_of(run)
    # The quota is asked where a turn starts (``turns.start_turn``, as the chat API does).
    later = turns.start_turn(agent="support", message="hi", actor=ALICE, thread_id=run.thread_id)
    assert isinstance(later, Run)
