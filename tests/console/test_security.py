"""Issue #35 in the console: its decisions count against the API's decision rate, and text that
reorders what a person reads (Unicode bidi controls) is shown for what it is."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse

from agent_core.choices import CallStatus
from agent_core.models import ToolCall
from approvals.models import DecisionAttempt
from console.bidi import BIDI_CONTROLS
from tests.console.conftest import actor, copies_of

pytestmark = pytest.mark.django_db

EDITABLE = re.compile(r"<textarea[^>]*>.*?</textarea>", re.S)


@pytest.fixture
def decision_rate(settings: Any) -> None:
    settings.AGENT = {**settings.AGENT, "THROTTLE_RATES": {"decision": "2/min"}}


def test_console_decisions_share_the_apis_decision_rate(login, refund, decision_rate):
    """310 console rejects were all processed where the API answered 429 from the 301st."""
    first, second, third = [refund, *copies_of(refund, 2)]
    fran = login("fran")
    api = fran.post("/agent/tool-call/reject", {"tool_call_id": first.pk}, "application/json")
    assert api.status_code == 200
    assert fran.post(reverse("console:approve", args=[second.pk])).status_code == 302
    refused = fran.post(reverse("console:approve", args=[third.pk]))
    assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
    bulk = fran.post(
        reverse("console:bulk"), {"ids": [third.pk], "action": "approve", "confirm": "on"}
    )
    assert b"0 of 1 approved" in bulk.content
    assert ToolCall.objects.get(pk=third.pk).status == CallStatus.PENDING_APPROVAL
    assert DecisionAttempt.objects.filter(tool_call_id=third.pk).count() == 0


def test_bidi_controls_are_shown_on_rows_cards_run_pages_and_the_audit(
    login, turn, people, finance_policy
):
    """U+202E in args and summaries showed unchanged (reordering what the approver reads)."""
    tricked = '/call issue_refund {"order_id": "A-1\u202e0001\u2066", "amount": 5}'
    call = ToolCall.objects.get(run=turn(tricked, actor=actor(people["alice"])))
    fran = login("fran")
    fragment = {"HTTP_X_CONSOLE_FRAGMENT": "1"}
    pages = {
        "inbox": fran.get(reverse("console:inbox")),
        "row": fran.get(reverse("console:call_row", args=[call.pk])),
        "card": fran.get(reverse("console:call", args=[call.pk]), **fragment),
    }
    reason = "refund\u202eoverride\u200f"
    fran.post(reverse("console:reject", args=[call.pk]), {"reason": reason})
    pages["run"] = fran.get(reverse("console:run", args=[call.run_id]))
    pages["audit"] = fran.get(reverse("console:audit"))
    for name, response in pages.items():
        # An edit form's text is what it sends back: shown as stored, never rewritten.
        html = EDITABLE.sub("", response.content.decode())
        assert response.status_code == 200, name
        found = BIDI_CONTROLS.search(html)
        assert not found, (name, html[found.start() - 300 : found.end() + 50])
        assert "[U+202E]" in html, name
    assert "refund[U+202E]override[U+200F]" in pages["audit"].content.decode()
    assert ToolCall.objects.get(pk=call.pk).reason == reason  # shown, not changed
