"""Delegation (SPEC §14) with the inline runner: a child run's answer, its cards, its end."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from agent_core.choices import CallStatus, RunStatus
from agent_core.engine import cancel, runs
from agent_core.models import Run, StreamFrame, ToolCall
from agent_core.runner.sweep import sweep
from approvals import services as port
from demo.models import Refund
from tests.conftest import ALICE

pytestmark = pytest.mark.django_db


def ask(tool: str, message: str) -> str:
    return f"/call {tool} {json.dumps({'message': message})}"


REFUND_10 = '/call issue_refund {"order_id": "A-1001", "amount": 30}'


def child_of(run: Run) -> Run:
    return Run.objects.get(parent_run=run)


def kinds(run: Run) -> list[str]:
    return list(StreamFrame.objects.filter(run=run).order_by("seq").values_list("kind", flat=True))


def test_a_child_action_is_approved_by_id_alone_and_its_answer_reaches_the_parent(desk, decide):
    parent = desk(ask("ask_billing", REFUND_10))
    assert parent.status == RunStatus.WAITING
    child = child_of(parent)
    assert child.status == RunStatus.WAITING and child.thread_id != parent.thread_id
    assert child.thread.owner_ref == ALICE.ref
    [delegation] = ToolCall.objects.filter(run=parent)
    assert delegation.status == CallStatus.EXECUTING and child.parent_tool_call_id == delegation.pk
    [refund] = ToolCall.objects.filter(run=child)
    assert refund.status == CallStatus.PENDING_APPROVAL and refund.requester_ref == ALICE.ref
    # The child's card is in the parent's stream, said to be the child's.
    card = StreamFrame.objects.get(run=parent, kind="approval-requested")
    assert card.data["tool_call_id"] == refund.pk and card.data["run_id"] == child.pk
    assert card.data["parent_tool_call_id"] == delegation.pk
    decide(port.approve, refund.pk, actor=ALICE)
    for row in (parent, child, delegation):
        row.refresh_from_db()
    assert child.status == parent.status == RunStatus.COMPLETED
    assert Refund.objects.filter(tool_call_id=refund.pk).count() == 1
    assert delegation.status == CallStatus.SUCCEEDED and "issue_refund returned" in str(
        delegation.result
    )
    seen = kinds(parent)
    assert seen.count("finish") == 2 and seen[-1] == "finish" and "delegated" in seen
    seqs = list(StreamFrame.objects.filter(run=parent).values_list("seq", flat=True))
    assert sorted(seqs) == list(range(1, len(seqs) + 1))


@pytest.mark.parametrize("outcome", ["reject", "cancel"])
def test_the_parent_model_is_told_what_became_of_the_child(desk, decide, outcome):
    parent = desk(ask("ask_billing", REFUND_10))
    child = child_of(parent)
    [refund] = ToolCall.objects.filter(run=child)
    if outcome == "reject":
        decide(port.reject, refund.pk, actor=ALICE, reason="too much")
    else:
        decide(cancel.request_cancel, child.pk, actor=ALICE)
    parent.refresh_from_db()
    assert parent.status == RunStatus.COMPLETED
    [delegation] = ToolCall.objects.filter(run=parent)
    if outcome == "reject":
        assert delegation.status == CallStatus.SUCCEEDED and "rejected" in str(delegation.result)
    else:
        assert delegation.status == CallStatus.FAILED and "was cancelled" in delegation.error


def test_cancelling_the_parent_cancels_the_waiting_child(desk, decide):
    parent = desk(ask("ask_billing", REFUND_10))
    child = child_of(parent)
    decide(cancel.request_cancel, parent.pk, actor=ALICE)
    parent.refresh_from_db()
    child.refresh_from_db()
    assert parent.status == child.status == RunStatus.CANCELLED
    assert kinds(parent)[-1] == kinds(child)[-1] == "finish"
    assert ToolCall.objects.get(run=parent).status == CallStatus.CANCELLED


def test_a_gated_delegation_asks_a_person_before_the_child_starts(desk, decide):
    parent = desk(ask("ask_billing_gated", "hello"))
    [gated] = ToolCall.objects.filter(run=parent)
    assert gated.status == CallStatus.PENDING_APPROVAL and not Run.objects.filter(parent_run=parent)
    decide(port.approve, gated.pk, actor=ALICE)
    parent.refresh_from_db()
    assert parent.status == RunStatus.COMPLETED
    assert child_of(parent).status == RunStatus.COMPLETED


def test_a_detached_child_returns_its_run_id_at_once(desk):
    parent = desk(ask("start_billing", REFUND_10))
    assert parent.status == RunStatus.COMPLETED
    [call] = ToolCall.objects.filter(run=parent)
    child = child_of(parent)
    assert call.result == {"run_id": child.pk} and child.parent_tool_call_id is None
    assert child.status == RunStatus.WAITING  # its refund waits in the inbox, on its own
    assert not StreamFrame.objects.filter(run=parent, kind="approval-requested").exists()


def test_a_cycle_is_refused(desk):
    parent = desk(ask("ask_relay", ask("ask_desk", "hi")))
    relay = child_of(parent)
    [back] = ToolCall.objects.filter(run=relay)
    assert back.status == CallStatus.FAILED and back.error.startswith("delegation_cycle")
    assert "desk → relay → desk" in back.error
    parent.refresh_from_db()
    assert parent.status == RunStatus.COMPLETED


def test_the_depth_limit_is_refused(desk, settings):
    settings.AGENT = {**settings.AGENT, "MAX_DELEGATION_DEPTH": 1}
    parent = desk(ask("ask_relay", ask("ask_billing", "hi")))
    [deeper] = ToolCall.objects.filter(run=child_of(parent))
    assert deeper.status == CallStatus.FAILED
    assert deeper.error.startswith("delegation_depth_exceeded")
    parent.refresh_from_db()
    assert parent.status == RunStatus.COMPLETED


def test_a_dead_child_settles_the_parents_call_and_the_parent_completes(desk, decide):
    parent = desk(ask("ask_billing", REFUND_10))
    child = child_of(parent)
    decide(runs.fail_run, child.pk, code="model_error", message="the provider is down")
    parent.refresh_from_db()
    assert parent.status == RunStatus.COMPLETED
    [delegation] = ToolCall.objects.filter(run=parent)
    assert delegation.status == CallStatus.FAILED
    assert "failed (model_error" in delegation.error
    # The parent's model was told: its final answer says the delegation did not succeed.
    assert "ask_billing did not succeed" in parent.messages.order_by("-seq").first().text


def test_an_expired_child_card_is_said_as_such(desk, decide):
    parent = desk(ask("ask_billing", REFUND_10))
    [refund] = ToolCall.objects.filter(run=child_of(parent))
    ToolCall.objects.filter(pk=refund.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    decide(port.expire_due)
    parent.refresh_from_db()
    assert parent.status == RunStatus.COMPLETED
    assert "expired" in str(ToolCall.objects.get(run=parent).result)


def test_a_dead_parent_cancels_its_children(desk, decide):
    parent = desk(ask("ask_billing", REFUND_10))
    child = child_of(parent)
    decide(runs.fail_run, parent.pk, code="run_failed", message="gone")
    assert ToolCall.objects.get(run=parent).status == CallStatus.FAILED
    decide(sweep)
    child.refresh_from_db()
    assert child.status == RunStatus.CANCELLED
    assert ToolCall.objects.get(run=child).status == CallStatus.CANCELLED
