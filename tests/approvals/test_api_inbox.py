"""The pending inbox over REST (``GET /agent/approvals/pending``; DRF APIClient, in process):
what each actor may decide, its pages, orders, search and filters, and a custom policy's."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db.models import Q
from django.test import override_settings
from django.utils import timezone

from agent_core.engine import runs
from agent_core.models import ToolCall
from approvals.policy import DefaultPolicy
from tests.approvals.rest import actor, client_for, get
from tests.conftest import calls_of, refund
from tests.factories import make_user

pytestmark = pytest.mark.django_db


FINANCE_ABOVE_100 = {
    "RULES": {"issue_refund": {"when": {"amount__gt": 100}, "approver": "finance"}}
}


@override_settings(APPROVALS=FINANCE_ABOVE_100)
def test_the_inbox_lists_what_the_actor_may_decide_across_threads(turn, people):
    alice, bob, fran = people["alice"], people["bob"], people["fran"]
    big = calls_of(turn(refund(150), actor=actor(alice)))[0]
    small = calls_of(turn(refund(50), actor=actor(alice)))[0]
    bobs_big = calls_of(turn(refund(300), actor=actor(bob)))[0]
    question = calls_of(turn('/call ask_user {"question": "Why?"}', actor=actor(alice)))[0]
    ids = lambda data: [r["tool_call_id"] for r in data["results"]]  # noqa: E731
    assert ids(get(fran, "/agent/approvals/pending")[1]) == [big.pk, bobs_big.pk]
    assert ids(get(alice, "/agent/approvals/pending")[1]) == [small.pk, question.pk]
    assert ids(get(bob, "/agent/approvals/pending")[1]) == []
    [row] = get(fran, "/agent/approvals/pending", thread=bobs_big.thread_id)[1]["results"]
    assert row == {
        "tool_call_id": bobs_big.pk,
        "status": "pending_approval",
        "tool_name": "issue_refund",
        "kind": "action",
        "args": {"order_id": "A-1001", "amount": "300", "reason": ""},
        "confirmation": "",
        "summary": "Refund 300.00 on order A-1001 — maria@example.com, order total 59.90",
        "approver": "finance",
        "requester": f"user:{bob.pk}",
        "thread_id": bobs_big.thread_id,
        "run_id": bobs_big.run_id,
        "agent": "support",
        "requested_at": row["requested_at"],
        "expires_at": None,
        "answer_schema": None,
        "approvals": [],
        "approvals_needed": 1,
        "chain": ["support"],
    }
    q = get(alice, "/agent/approvals/pending", tool="ask_user")[1]["results"][0]
    assert q["answer_schema"]["required"] == ["answer"]
    assert ids(get(alice, "/agent/approvals/pending", approver="requester")[1]) == [small.pk]
    assert ids(get(fran, "/agent/approvals/pending", agent="support")[1]) == [big.pk, bobs_big.pk]
    assert ids(get(fran, "/agent/approvals/pending", agent="ops")[1]) == []
    assert ids(get(fran, "/agent/approvals/pending", tool="purge_cache")[1]) == []
    # Decided calls leave the inbox.
    runs.fail_run(big.run_id, code="run_failed", message="gone")
    assert ids(get(fran, "/agent/approvals/pending")[1]) == [bobs_big.pk]
    assert client_for(None).get("/agent/approvals/pending").status_code == 401


def test_the_inbox_pages_with_a_cursor_in_a_few_queries(turn, people, django_assert_num_queries):
    alice = people["alice"]
    made = [calls_of(turn(refund(10 + i), actor=actor(alice)))[0].pk for i in range(7)]
    # Same requested_at for two calls: the id breaks the tie, so no page repeats or skips one.
    ToolCall.objects.filter(pk__in=made[2:4]).update(requested_at=timezone.now())
    expected = list(
        ToolCall.objects.filter(pk__in=made)
        .order_by("requested_at", "id")
        .values_list("pk", flat=True)
    )
    seen: list[str] = []
    cursor = None
    client = client_for(alice)
    while True:
        params = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        # One query for the actor's roles (the resolver), then the first page in one named
        # statement, a later one's keys (compiled by the ORM) and their rows
        # (``sql.PENDING_ROWS``): never one per row.
        with django_assert_num_queries(3 if cursor else 2):
            data = client.get("/agent/approvals/pending", params).json()
        seen += [r["tool_call_id"] for r in data["results"]]
        cursor = data["next_cursor"]
        if cursor is None:
            assert data["next"] is None
            break
        assert f"cursor={cursor}" in data["next"]
    assert seen == expected


@override_settings(APPROVALS=FINANCE_ABOVE_100)
def test_the_inbox_sorts_by_deadline_searches_and_filters_by_requester(turn, people):
    alice, bob, fran = people["alice"], people["bob"], people["fran"]
    first, second, third = (
        calls_of(turn(refund(amount), actor=actor(who)))[0]
        for amount, who in ((150, alice), (300, bob), (400, alice))
    )
    soon = timezone.now() + timedelta(minutes=5)
    ToolCall.objects.filter(pk=second.pk).update(expires_at=soon)
    ToolCall.objects.filter(pk=third.pk).update(expires_at=soon + timedelta(minutes=1))
    ids = lambda **params: [r["tool_call_id"] for r in get(fran, PENDING, **params)[1]["results"]]  # noqa: E731
    assert ids(sort="deadline") == [second.pk, third.pk, first.pk]  # no deadline: last
    assert ids(sort="newest") == [third.pk, second.pk, first.pk]
    # Deadline order pages like any other, through the calls without one.
    page = get(fran, PENDING, sort="deadline", limit=2)[1]
    rest = get(fran, PENDING, sort="deadline", limit=2, cursor=page["next_cursor"])[1]
    assert [r["tool_call_id"] for r in rest["results"]] == [first.pk]
    assert ids(q="300.00") == [second.pk]  # the summary
    assert ids(q="A-1001") == [first.pk, second.pk, third.pk]  # the arguments
    assert ids(requester=f"user:{bob.pk}") == [second.pk]
    # A cursor of one order is no cursor of another.
    assert get(fran, PENDING, sort="newest", cursor=page["next_cursor"])[0] == 400
    assert get(fran, PENDING, sort="sideways")[0] == 400


PENDING = "/agent/approvals/pending"


@pytest.mark.parametrize(
    "params", [{"cursor": "garbage!"}, {"limit": 0}, {"limit": "many"}, {"limit": 201}]
)
def test_bad_paging_parameters_are_400(people, params):
    status, data = get(people["alice"], "/agent/approvals/pending", **params)
    assert (status, data["code"]) == (400, "invalid")


class SupervisorsDecideAll(DefaultPolicy):
    """A custom policy: supervisors may decide any pending approval, and the inbox knows it."""

    def can_decide(self, actor, call):
        return super().can_decide(actor, call) or actor.has_role("supervisor")

    def decidable(self, actor):
        q = super().decidable(actor)
        if actor.has_role("supervisor"):
            q |= Q(status="pending_approval")
        return q


def test_the_inbox_honours_a_custom_policys_decidable(turn, people, post, settings):
    settings.AGENT = {
        **settings.AGENT,
        "APPROVAL_POLICY": "tests.approvals.test_api_inbox.SupervisorsDecideAll",
    }
    sam = make_user("sam", "supervisor")
    mine = calls_of(turn(refund(10), actor=actor(sam)))[0]
    alices = calls_of(turn(refund(11), actor=actor(people["alice"])))[0]
    bobs = calls_of(turn(refund(12), actor=actor(people["bob"])))[0]
    listed = get(sam, "/agent/approvals/pending")[1]["results"]
    # Sam's own call matches two cases of the policy; the inbox lists it once.
    assert [r["tool_call_id"] for r in listed] == [mine.pk, alices.pk, bobs.pk]
    assert post(sam, "/agent/tool-call/approve", {"tool_call_id": bobs.pk})[0] == 200
    assert [r["tool_call_id"] for r in get(sam, "/agent/approvals/pending")[1]["results"]] == [
        mine.pk,
        alices.pk,
    ]
