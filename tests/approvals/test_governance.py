"""The seed scenarios of approval governance, each end to end through the loop (in process)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from agent_core.actors import Actor
from agent_core.choices import CallStatus, RunStatus
from agent_core.engine.decisions import decision
from agent_core.exceptions import NotFound
from agent_core.models import Message, StreamFrame, ToolCall
from agent_core.runner.sweep import sweep
from approvals import amendments
from approvals import services as port
from approvals.exceptions import ApprovalExpired, InvalidDecision, NotApprover
from approvals.models import Action, DecisionAttempt
from approvals.policy import DefaultPolicy
from demo.models import CachePurge, Refund
from tests.conftest import ALICE, BOB, FRAN, calls_of, frame_kinds, refund

pytestmark = pytest.mark.django_db

FINANCE_ABOVE_100 = {
    "RULES": {
        "issue_refund": [
            {"when": {"amount__lte": 20}, "required": False},
            {"when": {"amount__gt": 100}, "approver": "finance", "ttl": 3600},
        ],
    }
}
TTL_60 = {"RULES": {"*": {"ttl": 60}}}


def audit() -> list[tuple[str, str, str]]:
    return list(
        DecisionAttempt.objects.order_by("id").values_list("action", "actor_ref", "outcome")
    )


def pass_deadline(call: ToolCall) -> None:
    """The clock passes the request's deadline (nobody is watching)."""
    ToolCall.objects.filter(pk=call.pk).update(expires_at=timezone.now() - timedelta(seconds=1))


# --- who approves --------------------------------------------------------------------------------


@override_settings(APPROVALS=FINANCE_ABOVE_100)
def test_a_role_approver_decides_and_nobody_else(turn, decide):
    run = turn(refund(150))
    [call] = calls_of(run)
    assert call.approver == "finance" and call.requires_approval
    assert call.expires_at is not None
    with pytest.raises(NotApprover):
        decide(port.approve, call.pk, actor=ALICE)  # the requester holds no finance role
    with pytest.raises(NotFound):  # BOB cannot even see the call
        decide(port.approve, call.pk, actor=BOB)
    with pytest.raises(NotFound):
        decide(port.approve, "tc_unknown", actor=FRAN)
    assert Refund.objects.count() == 0
    decide(port.approve, call.pk, actor=FRAN, via="slack")
    run.refresh_from_db()
    call.refresh_from_db()
    assert run.status == RunStatus.COMPLETED and Refund.objects.get().amount == 150
    assert (call.decided_by_ref, call.decided_via) == (FRAN.ref, "slack")
    assert call.requester_ref == ALICE.ref
    assert audit() == [
        ("approve", ALICE.ref, "not_approver"),
        ("approve", BOB.ref, "not_found"),
        ("approve", FRAN.ref, "not_found"),
        ("approve", FRAN.ref, "applied"),
    ]


@override_settings(APPROVALS=FINANCE_ABOVE_100)
def test_below_the_threshold_the_call_runs_at_once_and_is_recorded(turn):
    run = turn(refund(15))
    [call] = calls_of(run)
    assert run.status == RunStatus.COMPLETED and Refund.objects.get().amount == 15
    assert call.status == CallStatus.SUCCEEDED and not call.requires_approval
    assert call.decided_via == "policy" and call.kind == "action"
    assert "approval-requested" not in frame_kinds(run)


@override_settings(APPROVALS=FINANCE_ABOVE_100)
def test_between_the_rules_the_requester_approves_without_a_deadline(turn, decide):
    run = turn(refund(50))
    [call] = calls_of(run)
    assert (call.approver, call.expires_at) == ("requester", None)
    decide(port.approve, call.pk, actor=ALICE)
    assert Refund.objects.get().amount == 50


def test_a_policy_changed_while_the_run_waits_does_not_re_decide(turn, decide):
    with override_settings(APPROVALS=FINANCE_ABOVE_100):
        run = turn(refund(150))
    [call] = calls_of(run)
    stamped = call.expires_at
    # Now refunds go to the requester with a short deadline; the waiting call keeps its answer.
    with override_settings(APPROVALS={"RULES": {"issue_refund": {"ttl": 1}}}):
        assert port.expire_due() == 0
        with pytest.raises(NotApprover):
            decide(port.approve, call.pk, actor=ALICE)
        call.refresh_from_db()
        assert (call.approver, call.expires_at) == ("finance", stamped)
        decide(port.approve, call.pk, actor=FRAN)
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED and Refund.objects.count() == 1


# --- expiry --------------------------------------------------------------------------------------


@override_settings(APPROVALS=TTL_60)
def test_a_lapsed_request_expires_in_the_sweep_and_the_run_carries_on(
    turn, decide, sync_runner, sent
):
    run = turn(refund(10))
    [call] = calls_of(run)
    assert call.expires_at is not None
    assert abs((call.expires_at - call.requested_at).total_seconds() - 60) < 5
    pass_deadline(call)
    decide(sweep, sync_runner)
    run.refresh_from_db()
    call.refresh_from_db()
    assert call.status == CallStatus.EXPIRED and call.decided_via == "expiry"
    assert run.status == RunStatus.COMPLETED and Refund.objects.count() == 0
    kinds = frame_kinds(run)
    order = ["approval-requested", "approval-settled", "tool-output-denied", "step-start"]
    after_request = kinds[kinds.index("approval-requested") :]
    assert [k for k in after_request if k in order][:4] == order and kinds[-1] == "finish"
    settled_frame = StreamFrame.objects.get(run=run, kind="approval-settled").data
    denied = StreamFrame.objects.get(run=run, kind="tool-output-denied").data
    assert settled_frame["status"] == "expired" and denied["reason"] == "approval expired"
    told = Message.objects.get(thread=run.thread, role="tool").content[0]["output"]
    assert "expired" in told and "rejected" not in told
    assert sent == [("requested", call.pk, "pending_approval"), ("settled", call.pk, "expired")]
    with pytest.raises(ApprovalExpired):
        decide(port.approve, call.pk, actor=ALICE)
    assert audit() == [("expire", "system", "applied"), ("approve", ALICE.ref, "approval_expired")]


@override_settings(APPROVALS=TTL_60)
def test_a_decision_after_the_deadline_expires_the_call_itself(turn, decide):
    run = turn(refund(10))
    [call] = calls_of(run)
    pass_deadline(call)
    with pytest.raises(ApprovalExpired):
        decide(port.reject, call.pk, actor=ALICE, reason="too late anyway")
    call.refresh_from_db()
    run.refresh_from_db()
    assert call.status == CallStatus.EXPIRED and run.status == RunStatus.COMPLETED
    # One outcome, recorded once: the expiry, then the refused attempt.
    assert audit() == [("expire", "system", "applied"), ("reject", ALICE.ref, "approval_expired")]
    assert port.expire_due() == 0


@override_settings(APPROVALS=TTL_60)
def test_a_decision_inside_the_ttl_wins_and_the_expiry_never_fires(turn, decide):
    run = turn(refund(10))
    [call] = calls_of(run)
    decide(port.approve, call.pk, actor=ALICE)
    pass_deadline(call)
    assert port.expire_due() == 0
    call.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED and Refund.objects.count() == 1
    assert decide(port.approve, call.pk, actor=ALICE).result == port.Result.UNCHANGED
    assert "expired" not in StreamFrame.objects.filter(run=run).values_list("data", flat=True)


@override_settings(APPROVALS={**TTL_60, "MAX_EXTENSION": {"issue_refund": 3 * 3600}})
def test_an_approver_extends_the_deadline_and_it_is_audited(turn, decide):
    run = turn(refund(10))
    [call] = calls_of(run)
    before = call.expires_at
    assert before is not None
    with pytest.raises(NotFound):
        amendments.extend(call.pk, actor=BOB, ttl=timedelta(hours=2))
    with pytest.raises(InvalidDecision):
        amendments.extend(call.pk, actor=ALICE, expires_at=before - timedelta(seconds=5))
    new = amendments.extend(
        call.pk, actor=ALICE, ttl=timedelta(hours=2), via="console"
    ).call.expires_at
    assert new is not None
    call.refresh_from_db()
    assert call.expires_at == new and new > before + timedelta(minutes=30)
    frame = StreamFrame.objects.get(run=run, kind="approval-extended").data
    assert frame == {"tool_call_id": call.pk, "expires_at": new.isoformat()}
    extend = list(DecisionAttempt.objects.filter(action=Action.EXTEND).order_by("id"))
    assert [a.outcome for a in extend] == ["not_found", "invalid", "applied"]
    assert extend[-1].detail == f"expires_at {before.isoformat()} -> {new.isoformat()}"
    assert extend[-1].via == "console"
    pass_deadline(call)
    with pytest.raises(ApprovalExpired):
        amendments.extend(call.pk, actor=ALICE, ttl=timedelta(hours=2))
    call.refresh_from_db()
    assert call.status == CallStatus.EXPIRED


@override_settings(APPROVALS=TTL_60)
def test_an_extension_is_bounded_by_the_policys_ttl_and_the_refusal_audited(turn):
    """Issue #12 defect 7: no deadline in year 9999 erasing a 60-second ttl."""
    [call] = calls_of(turn(refund(10)))
    before = call.expires_at
    assert before is not None
    far = timezone.now().replace(year=9999)
    for kwargs in ({"expires_at": far}, {"ttl": timedelta(hours=2)}):
        with pytest.raises(InvalidDecision, match="at most 0:01:00 past now"):
            amendments.extend(call.pk, actor=ALICE, **kwargs)
    ToolCall.objects.filter(pk=call.pk).update(expires_at=timezone.now() + timedelta(seconds=5))
    new = amendments.extend(call.pk, actor=ALICE, ttl=timedelta(seconds=55)).call.expires_at
    call.refresh_from_db()
    assert call.expires_at == new
    outcomes = DecisionAttempt.objects.filter(action=Action.EXTEND).order_by("id")
    assert [a.outcome for a in outcomes] == ["invalid", "invalid", "applied"]


def test_a_request_without_a_deadline_cannot_be_extended(turn):
    [call] = calls_of(turn(refund(10)))
    with pytest.raises(InvalidDecision):
        amendments.extend(call.pk, actor=ALICE, ttl=timedelta(hours=1))


# --- edited args ---------------------------------------------------------------------------------


def test_edited_args_are_validated_and_the_original_is_kept(turn, decide):
    run = turn(refund(80))
    [call] = calls_of(run)
    with pytest.raises(InvalidDecision) as info:
        decide(port.approve, call.pk, actor=ALICE, args={"order_id": "A-1001", "amount": -1})
    assert info.value.errors[0]["loc"] == ["amount"]
    with pytest.raises(InvalidDecision):
        decide(port.approve, call.pk, actor=ALICE, args={"order_id": "A-1001", "bogus": 1})
    assert calls_of(run)[0].status == CallStatus.PENDING_APPROVAL
    decide(port.approve, call.pk, actor=ALICE, args={"order_id": "A-1001", "amount": "30.5"})
    call.refresh_from_db()
    assert call.original_args == {"order_id": "A-1001", "amount": "80", "reason": ""}
    assert call.args == {"order_id": "A-1001", "amount": "30.5", "reason": ""}
    assert Refund.objects.get().amount == pytest.approx(30.5)
    told = Message.objects.get(thread=run.thread, role="tool").content[0]["output"]
    assert "edited arguments" in told["note"]
    assert [a[2] for a in audit()] == ["invalid", "invalid", "applied"]


def test_an_edit_is_bounded_by_the_tool_and_audited_field_by_field(turn, decide):
    """Issue 42: a refund of 80 on A-1001 (total 59.90) may not become one on another order, nor
    exceed the order's total; an accepted edit's audit row says what changed."""
    run = turn(refund(80))
    [call] = calls_of(run)
    other_order = {"order_id": "A-1003", "amount": "50", "reason": ""}
    with pytest.raises(InvalidDecision, match="order_id may not be edited"):
        decide(port.approve, call.pk, actor=ALICE, args=other_order)
    too_much = {"order_id": "A-1001", "amount": "5000", "reason": ""}
    with pytest.raises(InvalidDecision, match=r"exceeds the order's total of 59\.90"):
        decide(port.approve, call.pk, actor=ALICE, args=too_much)
    assert calls_of(run)[0].status == CallStatus.PENDING_APPROVAL and not Refund.objects.exists()
    decide(port.approve, call.pk, actor=ALICE, args={"order_id": "A-1001", "amount": "40"})
    details = list(DecisionAttempt.objects.order_by("id").values_list("outcome", "detail"))
    assert [outcome for outcome, _ in details] == ["invalid", "invalid", "applied"]
    assert details[-1][1] == 'edited amount: "80" → "40"'
    assert Refund.objects.get().amount == 40


def test_an_edit_is_previewed_with_the_policys_answer_and_nothing_decided(turn):
    run = turn(refund(80))
    [call] = calls_of(run)
    preview = port.preview_edit(call.pk, actor=ALICE, args={"order_id": "A-1001", "amount": "40"})
    assert [(c.field, c.before, c.after) for c in preview.changes] == [("amount", "80", "40")]
    assert preview.requirement.required and preview.requirement.approver == "requester"
    with pytest.raises(InvalidDecision):
        port.preview_edit(call.pk, actor=ALICE, args={"order_id": "A-1001", "amount": "60"})
    call.refresh_from_db()
    assert call.status == CallStatus.PENDING_APPROVAL and not DecisionAttempt.objects.exists()


# --- preflight -----------------------------------------------------------------------------------


def test_preflight_refuses_before_any_card(ops_turn):
    run = ops_turn('/call guarded_purge {"path": "/admin/users"}')
    [call] = calls_of(run)
    assert call.status == CallStatus.REFUSED and run.status == RunStatus.COMPLETED
    assert "approval-requested" not in frame_kinds(run)
    told = Message.objects.get(thread=run.thread, role="tool").content[0]["output"]
    assert "never purged" in told and CachePurge.objects.count() == 0


def test_preflight_already_done_runs_nothing(ops_turn):
    CachePurge.objects.create(path="/shop", tool_call_id="tc_earlier")
    run = ops_turn('/call guarded_purge {"path": "/shop"}')
    [call] = calls_of(run)
    assert call.status == CallStatus.SUCCEEDED and (call.result or {})["already"] is True
    assert CachePurge.objects.count() == 1 and "approval-requested" not in frame_kinds(run)


def test_preflight_confirmation_is_streamed_and_stored(ops_turn, decide):
    run = ops_turn('/call guarded_purge {"path": "/shop"}')
    [call] = calls_of(run)
    assert call.confirmation == "Purge /shop from every edge location."
    frame = StreamFrame.objects.get(run=run, kind="approval-requested").data
    assert frame["confirmation"] == call.confirmation
    decide(port.approve, call.pk, actor=ALICE)
    assert CachePurge.objects.get().tool_call_id == call.pk


def test_preflight_runs_again_right_before_execution(ops_turn, decide):
    run = ops_turn('/call guarded_purge {"path": "/shop"}')
    [call] = calls_of(run)
    CachePurge.objects.create(path="/shop", tool_call_id="tc_someone_else")  # while it waited
    decide(port.approve, call.pk, actor=ALICE)
    call.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED and (call.result or {})["already"] is True
    assert CachePurge.objects.count() == 1


def test_preflight_still_runs_under_a_remembered_approval(ops_turn, decide):
    first = ops_turn('/call guarded_purge {"path": "/a"}')
    decide(port.approve, calls_of(first)[0].pk, actor=ALICE, remember=True)
    refused = ops_turn('/call guarded_purge {"path": "/admin"}', thread_id=first.thread_id)
    assert calls_of(refused)[0].status == CallStatus.REFUSED
    done = ops_turn('/call guarded_purge {"path": "/a"}', thread_id=first.thread_id)
    assert (calls_of(done)[0].result or {})["already"] is True
    fresh = ops_turn('/call guarded_purge {"path": "/b"}', thread_id=first.thread_id)
    [call] = calls_of(fresh)
    assert call.decided_via == "remembered" and call.status == CallStatus.SUCCEEDED
    assert sorted(CachePurge.objects.values_list("path", flat=True)) == ["/a", "/b"]


# --- ask the user --------------------------------------------------------------------------------


def test_a_question_is_answered_once_by_the_threads_owner(turn, decide):
    run = turn('/call ask_user {"question": "Which order?"}')
    [call] = calls_of(run)
    frame = StreamFrame.objects.get(run=run, kind="input-requested").data
    assert frame["prompt"] == "Which order?" and "answer" in frame["schema"]["properties"]
    with pytest.raises(InvalidDecision):
        decide(port.approve, call.pk, actor=ALICE)
    with pytest.raises(InvalidDecision) as info:
        decide(port.answer, call.pk, actor=ALICE, answer={"answer": 3})
    assert info.value.errors[0]["loc"] == ["answer"]
    decide(port.answer, call.pk, actor=ALICE, answer={"answer": "A-1002"})
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    told = Message.objects.get(thread=run.thread, role="tool").content[0]["output"]
    assert told == {"answer": "A-1002"}
    assert [a[2] for a in audit()] == ["invalid", "invalid", "applied"]


def test_answering_an_approval_is_refused(turn, decide):
    [call] = calls_of(turn(refund(10)))
    with pytest.raises(InvalidDecision):
        decide(port.answer, call.pk, actor=ALICE, answer={"answer": "yes"})


class AnyoneMayAnswer(DefaultPolicy):
    def can_answer(self, actor: Actor, call: ToolCall) -> bool:
        return True


def test_the_policy_may_let_others_answer(turn, decide, settings):
    run = turn('/call ask_user {"question": "Which order?"}')
    [call] = calls_of(run)
    settings.AGENT = {
        **settings.AGENT,
        "APPROVAL_POLICY": "tests.approvals.test_governance.AnyoneMayAnswer",
    }
    decide(port.answer, call.pk, actor=BOB, answer={"answer": "A-1001"})
    call.refresh_from_db()
    assert call.decided_by_ref == BOB.ref and call.status == CallStatus.SUCCEEDED


# --- signals -------------------------------------------------------------------------------------


def test_signals_are_sent_after_commit(turn, django_capture_on_commit_callbacks, sent):
    [call] = calls_of(turn(refund(10)))
    assert sent == [("requested", call.pk, "pending_approval")]
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        port.reject(call.pk, actor=ALICE)
    assert len(sent) == 1  # not before the commit
    for callback in callbacks:
        callback()
    assert sent[1] == ("settled", call.pk, "rejected")


def test_cancelling_a_pending_approval_sends_approval_settled(
    turn, django_capture_on_commit_callbacks, sent
):
    """The cancel path (``Decision.settle`` with ``cancelled``) is announced like the others."""
    run = turn(refund(10))
    [call] = calls_of(run)
    with django_capture_on_commit_callbacks(execute=True), decision(call.pk) as held:
        assert held is not None
        held.settle(CallStatus.CANCELLED, decided_by_ref="system", decided_via="cancel")
    assert sent[-1] == ("settled", call.pk, "cancelled")
