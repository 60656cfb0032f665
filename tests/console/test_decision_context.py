"""Context for a decision (issue 42, item 2): a call's amount (a column, a sort, the bulk
dialog's total), duplicates marked and rejected together, related calls with their sum."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.urls import reverse

from agent_core.choices import CallStatus
from agent_core.models import ToolCall
from tests.console.conftest import actor, card_html, listed

pytestmark = pytest.mark.django_db

FRAGMENT = {"HTTP_X_CONSOLE_FRAGMENT": "1"}


def refund_call(turn, people, order: str, amount: str) -> ToolCall:
    command = f'/call issue_refund {{"order_id": "{order}", "amount": {amount}}}'
    return ToolCall.objects.get(run=turn(command, actor=actor(people["alice"])))


def test_a_call_stores_its_amount_and_the_inbox_sorts_on_it(login, turn, people, finance_policy):
    small = refund_call(turn, people, "A-1001", "5")
    large = refund_call(turn, people, "A-1002", "40.5")
    assert [small.amount, large.amount] == [Decimal("5.00"), Decimal("40.50")]
    client = login("fran")
    page = client.get(reverse("console:inbox"), {"sort": "amount"})
    assert listed(page) == [large.pk, small.pk]
    assert 'data-amount="40.50"' in page.content.decode()
    # The amount's cursor reads back: a page of one, then the next.
    first = client.get(reverse("console:inbox"), {"sort": "amount", "limit": 1})
    cursor = first.context["listing"].page.next_cursor
    second = client.get(reverse("console:inbox"), {"sort": "amount", "limit": 1, "cursor": cursor})
    assert listed(first) == [large.pk] and listed(second) == [small.pk]
    api = client.get("/agent/approvals/pending", {"sort": "amount"})
    assert [c["tool_call_id"] for c in api.json()["results"]] == [large.pk, small.pk]


def test_identical_pending_calls_are_marked_and_rejected_together(
    login, turn, people, decide, finance_policy
):
    calls = [refund_call(turn, people, "A-1003", "120") for _ in range(3)]
    oldest = calls[0]
    client = login("fran")
    page = client.get(reverse("console:inbox")).content.decode()
    assert page.count(f'data-duplicate-of="{oldest.pk}"') == 2
    card = card_html(client, calls[1])
    assert "3 identical pending calls" in card and "Reject 2 as duplicates" in card
    data = {
        "ids": [c.pk for c in calls[1:]],
        "action": "reject",
        "reason": f"duplicate of {oldest.pk}",
    }
    confirm = client.post(reverse("console:bulk"), data, **FRAGMENT)
    assert "Reject these 2 calls?" in confirm.content.decode()
    decide(
        lambda c, *_: c.post(reverse("console:bulk"), {**data, "confirm": "on"}, **FRAGMENT),
        client,
    )
    found = {c.pk: ToolCall.objects.get(pk=c.pk) for c in calls}
    assert found[oldest.pk].status == CallStatus.PENDING_APPROVAL
    assert [(found[c.pk].status, found[c.pk].reason) for c in calls[1:]] == [
        (CallStatus.REJECTED, f"duplicate of {oldest.pk}")
    ] * 2


def test_a_card_lists_the_related_calls_with_their_sum(login, turn, people, finance_policy):
    first = refund_call(turn, people, "A-1006", "100")
    second = refund_call(turn, people, "A-1006", "250.25")
    other = refund_call(turn, people, "A-1001", "7")
    card = card_html(login("fran"), second)
    assert f'data-related-call="{first.pk}"' in card
    assert f'data-related-call="{other.pk}"' not in card
    assert "Sum with this call: <strong>350.25</strong>" in card


def test_a_bulk_reject_without_a_reason_asks_for_one_over_its_calls_and_totals(
    login, turn, people, finance_policy
):
    calls = [refund_call(turn, people, "A-1001", n) for n in ("10", "2.5")]
    data = {"ids": [c.pk for c in calls], "action": "reject"}
    response = login("fran").post(reverse("console:bulk"), data, **FRAGMENT)
    html = response.content.decode()
    assert response.status_code == 400
    assert "Reject these 2 calls: give a reason" in html and "Nothing to decide" not in html
    assert "data-bulk-reason" in html
    assert "Total: <strong>12.50</strong>" in html
