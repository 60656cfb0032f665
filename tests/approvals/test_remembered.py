"""Remembered approvals end to end through the loop (in process): a grant approves the tool's
later calls in its thread until it is revoked or expires, and never more than it granted."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from agent_core.choices import CallStatus, RunStatus
from agent_core.exceptions import AlreadyDecided, NotFound
from approvals import amendments
from approvals import services as port
from approvals.exceptions import InvalidDecision
from approvals.models import Action, DecisionAttempt, RememberedApproval
from demo.models import Refund
from tests.conftest import ALICE, BOB, calls_of, frame_kinds, refund

pytestmark = pytest.mark.django_db


def test_remember_approves_later_calls_of_the_tool_in_the_same_thread(turn, decide, sent):
    first = turn(refund(10))
    [call] = calls_of(first)
    decide(port.approve, call.pk, actor=ALICE, remember=True)
    grant = RememberedApproval.objects.get()
    assert (grant.thread_id, grant.tool_name, grant.granted_by_ref) == (
        first.thread_id,
        "issue_refund",
        ALICE.ref,
    )
    second = turn(refund(11), thread_id=first.thread_id)
    [again] = calls_of(second)
    assert second.status == RunStatus.COMPLETED and again.status == CallStatus.SUCCEEDED
    assert (again.decided_via, again.decided_by_ref, again.remember) == (
        "remembered",
        ALICE.ref,
        True,
    )
    kinds = frame_kinds(second)
    assert "approval-requested" not in kinds
    assert kinds.index("tool-input-available") < kinds.index("approval-settled")
    assert sent == [
        ("requested", call.pk, "pending_approval"),
        ("settled", call.pk, "approved"),
        ("settled", again.pk, "approved"),
    ]
    # Other threads still ask; so does another tool in the same thread.
    elsewhere = turn(refund(12))
    assert calls_of(elsewhere)[0].status == CallStatus.PENDING_APPROVAL
    other_tool = turn('/call purge_cache {"path": "/x"}', thread_id=first.thread_id)
    assert calls_of(other_tool)[0].status == CallStatus.PENDING_APPROVAL


def test_without_remember_the_next_call_asks_again(turn, decide):
    first = turn(refund(10))
    decide(port.approve, calls_of(first)[0].pk, actor=ALICE)
    second = turn(refund(11), thread_id=first.thread_id)
    assert calls_of(second)[0].status == CallStatus.PENDING_APPROVAL
    assert RememberedApproval.objects.count() == 0


def test_a_revoked_grant_asks_again(turn, decide):
    first = turn(refund(10))
    decide(port.approve, calls_of(first)[0].pk, actor=ALICE, remember=True)
    grant = RememberedApproval.objects.get()
    with pytest.raises(NotFound):
        amendments.revoke(grant.pk, actor=BOB)
    assert amendments.revoke(grant.pk, actor=ALICE) == port.Result.APPLIED
    assert amendments.revoke(grant.pk, actor=ALICE) == port.Result.UNCHANGED
    with pytest.raises(NotFound):
        amendments.revoke(grant.pk + 1000, actor=ALICE)
    second = turn(refund(11), thread_id=first.thread_id)
    assert calls_of(second)[0].status == CallStatus.PENDING_APPROVAL
    revokes = DecisionAttempt.objects.filter(action=Action.REVOKE).order_by("id")
    assert [a.outcome for a in revokes] == ["not_found", "applied", "unchanged", "not_found"]


@override_settings(APPROVALS={"REMEMBER_TTL": 600})
def test_a_remembered_approval_expires(turn, decide):
    first = turn(refund(10))
    decide(port.approve, calls_of(first)[0].pk, actor=ALICE, remember=True)
    grant = RememberedApproval.objects.get()
    assert grant.expires_at is not None and grant.is_active
    second = turn(refund(11), thread_id=first.thread_id)
    assert calls_of(second)[0].decided_via == "remembered"
    RememberedApproval.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    third = turn(refund(12), thread_id=first.thread_id)
    assert calls_of(third)[0].status == CallStatus.PENDING_APPROVAL


def test_a_never_rememberable_tool_refuses_remember_and_changes_nothing(ops_turn, decide):
    run = ops_turn('/call wire_money {"to": "acme", "amount": 5}')
    [call] = calls_of(run)
    with pytest.raises(InvalidDecision):
        decide(port.approve, call.pk, actor=ALICE, remember=True)
    call.refresh_from_db()
    assert call.status == CallStatus.PENDING_APPROVAL and RememberedApproval.objects.count() == 0
    decide(port.approve, call.pk, actor=ALICE)
    assert calls_of(run)[0].status == CallStatus.SUCCEEDED


def test_a_repeat_that_asks_for_more_than_was_granted_conflicts(turn, decide):
    run = turn(refund(10))
    [call] = calls_of(run)
    decide(port.approve, call.pk, actor=ALICE)
    with pytest.raises(AlreadyDecided):
        decide(port.approve, call.pk, actor=ALICE, remember=True)
    with pytest.raises(AlreadyDecided):
        decide(port.approve, call.pk, actor=ALICE, args={"order_id": "A-1001", "amount": 9})
    assert decide(port.approve, call.pk, actor=ALICE).result == port.Result.UNCHANGED
    assert Refund.objects.count() == 1 and RememberedApproval.objects.count() == 0
