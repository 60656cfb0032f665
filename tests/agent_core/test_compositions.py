"""Pipelines and parallel branches (SPEC §14) with the inline runner."""

from __future__ import annotations

import pytest

from agent_core.choices import CallStatus, RunStatus
from agent_core.models import Run, Step, ToolCall
from approvals import services as port
from demo.models import Refund
from tests.agent_core.test_delegation import REFUND_10, ask, child_of
from tests.conftest import ALICE

pytestmark = pytest.mark.django_db


def pending_of(agent: str) -> ToolCall:
    return ToolCall.objects.get(run__agent=agent, status=CallStatus.PENDING_APPROVAL)


@pytest.mark.parametrize("order", [("lawyer", "designer"), ("designer", "lawyer")])
def test_parallel_branches_park_and_merge_once_in_either_order(desk, decide, order):
    parent = desk(ask("ask_review", REFUND_10))
    review = child_of(parent)
    assert review.agent == "review" and review.status == RunStatus.WAITING
    branches = Run.objects.filter(parent_run=review)
    assert sorted(b.agent for b in branches) == ["designer", "lawyer"]
    assert all(b.status == RunStatus.WAITING for b in branches)
    decide(port.approve, pending_of(order[0]).pk, actor=ALICE)
    review.refresh_from_db()
    assert review.status == RunStatus.WAITING  # the other branch still waits on a person
    decide(port.approve, pending_of(order[1]).pk, actor=ALICE)
    review.refresh_from_db()
    parent.refresh_from_db()
    assert review.status == parent.status == RunStatus.COMPLETED
    assert Refund.objects.count() == 2
    merged = ToolCall.objects.get(run=parent).result
    assert str(merged).startswith("lawyer: Done. issue_refund returned")
    assert " | designer: Done. issue_refund returned" in str(merged)
    assert Step.objects.get(run=review, name="llm:1").attempts == 1  # the merge, once


def test_a_merge_agent_answers_for_the_branches(desk, decide):
    parent = desk(ask("ask_review_by_relay", "hello"))
    parent.refresh_from_db()
    assert parent.status == RunStatus.COMPLETED
    review = child_of(parent)
    agents = sorted(Run.objects.filter(parent_run=review).values_list("agent", flat=True))
    assert agents == ["designer", "lawyer", "relay"]
    merge = Run.objects.get(parent_run=review, agent="relay")
    assert merge.messages.order_by("seq")[0].text.startswith("lawyer: ")


def test_a_pipeline_hands_each_answer_to_the_next_step(desk, decide):
    parent = desk(ask("ask_chain", REFUND_10))
    chain = child_of(parent)
    [legal] = Run.objects.filter(parent_run=chain)
    decide(port.approve, pending_of("lawyer").pk, actor=ALICE)
    brand = Run.objects.get(parent_run=chain, agent="designer")
    assert "issue_refund returned" in brand.messages.order_by("seq")[0].text
    parent.refresh_from_db()
    assert parent.status == RunStatus.COMPLETED and legal.pk != brand.pk
    assert Refund.objects.count() == 1


def test_a_pipeline_stops_at_a_failed_step(desk, settings):
    settings.AGENT = {**settings.AGENT, "MAX_DELEGATION_DEPTH": 1}  # desk → chain, no deeper
    parent = desk(ask("ask_chain", REFUND_10))
    parent.refresh_from_db()
    assert parent.status == RunStatus.COMPLETED
    answer = str(ToolCall.objects.get(run=parent).result)
    assert answer.startswith("The pipeline stopped at lawyer: delegation_depth_exceeded")
    assert not Run.objects.filter(agent="designer").exists()
