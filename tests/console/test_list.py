"""The inbox as a list that scales: pages of one-line rows, one row per live update, bulk."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from agent_core.choices import CallStatus
from agent_core.models import ToolCall
from approvals import services as port
from approvals.models import DecisionAttempt
from tests.console.conftest import REFUND, actor, copies_of, listed

FRAGMENT = {"HTTP_X_CONSOLE_FRAGMENT": "1"}
PAGE_BYTES = 100_000  # issue #19: the first page of a 10,000-call inbox
ROW_BYTES = 5_000  # and a live update, per changed card


def test_pages_of_rows_cover_the_inbox_once_in_order_and_stay_small(login, refund):
    copies_of(refund, 119)
    client = login("fran")
    first = client.get(reverse("console:inbox"))
    assert len(first.content) <= PAGE_BYTES
    assert len(listed(first)) == 50 and first.context["listing"].counts["yours"] == 120
    seen, response = [], first
    while True:
        seen += listed(response)
        cursor = response.context["listing"].page.next_cursor
        if cursor is None:
            break
        assert 'rel="next"' in response.content.decode()
        response = client.get(reverse("console:inbox"), {"cursor": cursor})
    expected = list(
        ToolCall.objects.filter(status=CallStatus.PENDING_APPROVAL)
        .order_by("requested_at", "id")
        .values_list("pk", flat=True)
    )
    assert seen == expected
    newest = client.get(reverse("console:inbox"), {"sort": "newest"})
    assert listed(newest)[0] == expected[-1]
    assert listed(client.get(reverse("console:inbox"), {"q": "Refund 7.00"})) == [expected[7]]


def test_a_row_is_what_a_live_update_moves(login, refund, people):
    client = login("fran")
    url = reverse("console:call_row", args=[refund.pk])
    response = client.get(url, {"sort": "deadline"}, **FRAGMENT)
    assert response.status_code == 200 and len(response.content) <= ROW_BYTES
    html = response.content.decode()
    assert f'data-row="{refund.pk}"' in html and "Refund 25.00 on order A-1001" in html
    assert response["X-Console-Counts"] == "waiting_on_you=1;in_doubt=0"
    # Outside the page's filters or scope: no row.
    assert client.get(url, {"tool": "purge_cache"}, **FRAGMENT).status_code == 204
    assert client.get(url, {"show": "others"}, **FRAGMENT).status_code == 204
    assert login("otto").get(url, {"show": "others"}, **FRAGMENT).status_code == 200
    port.reject(refund.pk, actor=actor(people["fran"]), reason="no")
    gone = client.get(url, **FRAGMENT)
    assert gone.status_code == 204 and gone["X-Console-Counts"] == "waiting_on_you=0;in_doubt=0"


def test_a_row_without_a_summary_shows_its_arguments_on_one_line(login, refund):
    ToolCall.objects.filter(pk=refund.pk).update(summary="")
    html = login("fran").get(reverse("console:inbox")).content.decode()
    summary = html[html.index('class="summary"') :].split("</span>")[0]
    assert "&quot;order_id&quot;: &quot;A-1001&quot;" in summary and "\n" not in summary


def test_an_invalid_filter_shows_its_error_and_no_rows(login, refund):
    response = login("fran").get(reverse("console:inbox"), {"tool": "x" * 101})
    assert listed(response) == []
    assert "Ensure this value has at most 100 characters" in response.content.decode()


def _bulk(client, calls, action="approve", **extra):
    data = {"ids": [c.pk for c in calls], "action": action, **extra}
    return client.post(reverse("console:bulk"), data, **FRAGMENT)


def test_bulk_approve_confirms_then_decides_each_call_on_its_own(
    login, turn, people, decide, finance_policy
):
    alice = actor(people["alice"])
    calls = [ToolCall.objects.get(run=turn(REFUND, actor=alice)) for _ in range(3)]
    client = login("fran")
    confirm = _bulk(client, calls)
    assert confirm.status_code == 200
    html = confirm.content.decode()
    assert "Approve these 3 calls?" in html
    assert html.count("data-confirm-id=") == 3 and "Refund 25.00 on order A-1001" in html
    assert not DecisionAttempt.objects.exists()  # the confirmation decides nothing
    # Someone else decides one meanwhile.
    port.reject(calls[1].pk, actor=actor(people["felix"]), reason="duplicate")
    done = decide(_bulk, client, calls, confirm="on")
    html = done.content.decode()
    assert "2 of 3 approved" in html
    assert "felix rejected this" in html and "Not sent." in html
    statuses = [ToolCall.objects.get(pk=c.pk).status for c in calls]
    assert statuses == [CallStatus.SUCCEEDED, CallStatus.REJECTED, CallStatus.SUCCEEDED]
    attempts = DecisionAttempt.objects.filter(via="console").order_by("id")
    assert [(a.tool_call_id, a.outcome) for a in attempts] == [
        (calls[0].pk, "applied"),
        (calls[1].pk, "already_decided"),
        (calls[2].pk, "applied"),
    ]


def test_bulk_reject_needs_a_reason_and_one_tool(login, turn, people, finance_policy):
    refund = ToolCall.objects.get(run=turn(REFUND, actor=actor(people["alice"])))
    purge = ToolCall.objects.get(
        run=turn('/call purge_cache {"path": "/x"}', actor=actor(people["fran"]))
    )
    client = login("fran")
    no_reason = _bulk(client, [refund], "reject", confirm="on")
    assert no_reason.status_code == 400 and b"Give the reason" in no_reason.content
    mixed = _bulk(client, [refund, purge], confirm="on")
    assert mixed.status_code == 400
    assert b"Select calls of one tool: issue_refund, purge_cache." in mixed.content
    assert _bulk(client, []).status_code == 400
    assert not DecisionAttempt.objects.exists()
    done = _bulk(client, [refund], "reject", reason="not eligible", confirm="on")
    assert b"1 of 1 rejected" in done.content
    assert ToolCall.objects.get(pk=refund.pk).reason == "not eligible"


def test_bulk_decisions_are_authorized_call_by_call(login, refund):
    response = _bulk(login("otto"), [refund], confirm="on")
    assert b"You may not decide this call: it waits on finance. Not sent." in response.content
    assert ToolCall.objects.get(pk=refund.pk).status == CallStatus.PENDING_APPROVAL
    assert DecisionAttempt.objects.get().outcome == "not_approver"


def test_bulk_without_javascript_is_two_pages(login, refund):
    client = login("fran")
    page = client.post(reverse("console:bulk"), {"ids": [refund.pk], "action": "approve"})
    assert page.status_code == 200
    assert b"Back to the inbox" in page.content and b'name="confirm"' in page.content


@pytest.mark.parametrize("sort", ["oldest", "newest", "deadline"])
def test_every_order_pages_through_calls_with_and_without_a_deadline(login, refund, sort):
    copies = copies_of(refund, 4)
    ToolCall.objects.filter(pk__in=[c.pk for c in copies[:2]]).update(expires_at=None)
    ToolCall.objects.filter(pk=copies[3].pk).update(expires_at=timezone.now())
    client = login("fran")
    seen, params = [], {"sort": sort, "limit": 2}
    while True:
        response = client.get(reverse("console:inbox"), params)
        seen += listed(response)
        cursor = response.context["listing"].page.next_cursor
        if cursor is None:
            break
        params = {**params, "cursor": cursor}
    assert sorted(seen) == sorted([refund.pk, *(c.pk for c in copies)]) and len(seen) == 5
