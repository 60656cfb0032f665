"""The console's third pass (issue 42), in a real browser against a real server: edits a person
can see before they decide, and the record the edit leaves."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from agent_core.choices import CallStatus
from agent_core.models import ToolCall
from approvals.models import DecisionAttempt
from demo.models import Refund
from tests.console.conftest import REFUND
from tests.console.live.browser import call_of, in_thread, open_as, open_card, start, wait_live

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_an_edit_shows_its_diff_asks_to_confirm_and_is_recorded(
    server, browser, people, sync_runner
):
    refund = call_of(start(people, REFUND))  # 25.00 on A-1001 (total 59.90), for finance
    fran = open_as(browser, server, "fran")
    wait_live(fran)
    mine = open_card(fran, refund)
    mine.get_by_text("Edit arguments, then approve…").click()
    edited = {"order_id": "A-1001", "amount": "5000", "reason": ""}
    mine.get_by_label(re.compile("Arguments")).fill(json.dumps(edited))
    mine.get_by_role("button", name="Review the changes…").click()
    expect(mine.get_by_role("alert")).to_contain_text("exceeds the order's total of 59.90")
    edited["amount"] = "20.00"
    mine.get_by_label(re.compile("Arguments")).fill(json.dumps(edited))
    mine.get_by_role("button", name="Review the changes…").click()
    diff = mine.locator("[data-edit-preview]")
    expect(diff.locator('[data-change="amount"]')).to_contain_text('"25"')
    expect(diff.locator('[data-change="amount"]')).to_contain_text('"20.00"')
    expect(diff).to_contain_text("The policy gives the edited call to finance")
    confirm = diff.get_by_role("button", name="Confirm: approve with these changes")
    expect(confirm).to_be_focused()
    assert in_thread(lambda: ToolCall.objects.get(pk=refund.pk).status) == (
        CallStatus.PENDING_APPROVAL
    )
    confirm.click()
    expect(fran.get_by_role("status").first).to_contain_text("Approved with edited arguments")
    fran.goto(f"/console/runs/{refund.run_id}/")  # the run page follows the run live
    expect(fran.locator(".status.s-succeeded").first).to_be_visible()
    assert in_thread(lambda: [str(r.amount) for r in Refund.objects.all()]) == ["20.00"]
    fran.goto("/console/audit/")
    expect(fran.get_by_text('edited amount: "25" → "20.00"')).to_be_visible()
    detail = in_thread(lambda: DecisionAttempt.objects.get(tool_call_id=refund.pk).detail)
    assert detail == 'edited amount: "25" → "20.00"'
