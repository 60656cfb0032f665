"""The console's third pass (issue 42), in a real browser against a real server: edits a person
can see before they decide, and the record the edit leaves."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from agent_core.choices import CallStatus
from agent_core.models import ToolCall
from approvals.models import DecisionAttempt
from demo.models import Refund
from tests.console.conftest import REFUND
from tests.console.live.browser import (
    PHONE,
    call_of,
    card,
    in_thread,
    open_as,
    open_card,
    row,
    start,
    start_console_server,
    touchable,
    wait_live,
)

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


@pytest.fixture
def undo_server(people: Any, shop: None, demo_policy: None, tmp_path: Path) -> Iterator[Any]:
    """The console with a 3-second undo window (the test settings send decisions at once)."""
    running = start_console_server(tmp_path / "daphne.log", AIRLOCK_TEST_UNDO_SECONDS="3")
    yield running
    running.stop()


def test_a_decision_waits_with_an_undo_that_sends_nothing(
    undo_server, browser, people, sync_runner
):
    refund = call_of(start(people, REFUND))
    fran = open_as(browser, undo_server, "fran")
    wait_live(fran)
    open_card(fran, refund).get_by_role("button", name="Approve", exact=True).click()
    pending = fran.locator(f'[data-pending="{refund.pk}"]')
    expect(pending).to_contain_text(f"Approving issue_refund — {refund.summary}.")
    expect(row(fran, refund)).to_be_hidden()
    pending.get_by_role("button", name="Undo").click()
    expect(row(fran, refund)).to_be_visible()
    expect(pending).to_have_count(0)
    fran.wait_for_timeout(4000)  # past the window: nothing was sent
    assert in_thread(lambda: ToolCall.objects.get(pk=refund.pk).status) == (
        CallStatus.PENDING_APPROVAL
    )
    assert not in_thread(lambda: DecisionAttempt.objects.exists())
    back = card(fran, refund)  # the row comes back as it was, its card open
    back.get_by_role("button", name="Approve", exact=True).click()
    expect(fran.get_by_text(f"Approved: issue_refund — {refund.summary}.")).to_be_visible()
    assert in_thread(lambda: ToolCall.objects.get(pk=refund.pk).decided_via) == "console"


def test_more_keys_search_select_a_range_and_edit(server, browser, people, sync_runner):
    calls = [call_of(start(people, REFUND)) for _ in range(3)]
    fran = open_as(browser, server, "fran")
    wait_live(fran)
    fran.keyboard.press("/")
    expect(fran.get_by_role("searchbox")).to_be_focused()
    fran.locator("main").click(position={"x": 1, "y": 1})  # out of the search box
    fran.keyboard.press("j")
    fran.keyboard.press("x")  # the first row
    fran.keyboard.press("j")
    fran.keyboard.press("j")
    fran.keyboard.press("Shift+X")  # through the third
    for call in calls:
        expect(row(fran, call).locator("[data-select]")).to_be_checked()
    expect(fran.locator("[data-bulk-status]")).to_have_text("3 selected: issue_refund")
    fran.keyboard.press("e")
    expect(card(fran, calls[2]).get_by_label(re.compile("Arguments"))).to_be_focused()


def _fits(box: Any, viewport: Any) -> bool:
    return box is not None and box["y"] >= 0 and box["y"] + box["height"] <= viewport["height"]


def test_on_a_phone_the_first_row_and_approve_are_above_the_fold(
    server, browser, people, sync_runner
):
    calls = [call_of(start(people, REFUND)) for _ in range(2)]
    fran = open_as(browser, server, "fran", PHONE)
    wait_live(fran)
    expect(fran.locator(".shortcuts-hint")).to_be_hidden()  # no keyboard on a phone
    assert _fits(row(fran, calls[0]).bounding_box(), PHONE)
    assert touchable(row(fran, calls[0]).locator("[data-select]").bounding_box())
    approve = open_card(fran, calls[0]).get_by_role("button", name="Approve", exact=True)
    assert fran.evaluate("window.scrollY") == 0
    assert _fits(approve.bounding_box(), PHONE) and touchable(approve.bounding_box())
    nav = fran.get_by_role("navigation", name="Console")
    expect(nav).to_be_hidden()
    fran.get_by_role("button", name="Menu").click()
    for section in ("Inbox", "In doubt", "Remembered", "Runs", "Audit", "Metrics", "Notifications"):
        link = nav.get_by_role("link", name=re.compile(f"^{section}"))
        expect(link).to_be_visible()
        assert touchable(link.bounding_box()), section


def _refund(people: Any, order: str, amount: int) -> ToolCall:
    return call_of(
        start(people, f'/call issue_refund {{"order_id": "{order}", "amount": {amount}}}')
    )


def test_amounts_duplicates_and_related_calls_give_a_decision_its_context(
    server, browser, people, sync_runner
):
    # The demo's policy: refunds of 20 or more wait on finance.
    small = _refund(people, "A-1001", 25)
    first, again = _refund(people, "A-1001", 30), _refund(people, "A-1001", 30)
    other = _refund(people, "A-1002", 22)
    fran = open_as(browser, server, "fran")
    wait_live(fran)
    expect(row(fran, again).locator("[data-amount]")).to_contain_text("30.00")
    expect(row(fran, again)).to_contain_text(f"duplicate of {first.pk}")
    expect(row(fran, first).locator("[data-duplicate-of]")).to_have_count(0)
    fran.get_by_label("Sort", exact=True).select_option("amount")
    fran.get_by_role("button", name="Apply").click()
    rows = fran.locator("[data-row]")
    expect(rows).to_have_count(4)
    expect(rows.first).to_have_attribute("data-key", "30.00")  # largest first, ties newest first
    expect(rows.last).to_have_attribute("data-row", other.pk)
    opened = open_card(fran, again)
    related = opened.locator("[data-related]")
    expect(related.locator("[data-related-call]")).to_have_count(2)  # A-1001's, not A-1002's
    expect(related.locator("[data-related-total]")).to_have_text("Sum with this call: 85.00")
    opened.get_by_role("button", name="Reject 1 as duplicates…").click()
    dialog = fran.get_by_role("dialog", name="Reject this call?")
    expect(dialog).to_contain_text(f"duplicate of {first.pk}")
    dialog.get_by_role("button", name="Reject 1").click()
    expect(fran.get_by_role("dialog", name="1 of 1 rejected")).to_be_visible()
    assert in_thread(lambda: ToolCall.objects.get(pk=again.pk).reason) == f"duplicate of {first.pk}"
    fran.keyboard.press("Escape")
    # A bulk rejection sent without a reason asks for one, over its calls and their total.
    row(fran, small).locator("[data-select]").check()
    row(fran, other).locator("[data-select]").check()
    fran.locator(".bulk-reject summary").click()
    fran.locator(".bulk-reject [data-bulk-button]").click()
    asking = fran.get_by_role("dialog", name="Reject these 2 calls: give a reason")
    expect(asking.locator("[data-bulk-total]")).to_have_text("Total: 47.00")
    reason = asking.get_by_label("Reason the agent is told")
    expect(reason).to_be_focused()
    reason.fill("not eligible")
    asking.get_by_role("button", name="Reject 2…").click()
    confirm = fran.get_by_role("dialog", name="Reject these 2 calls?")
    expect(confirm.locator("[data-bulk-total]")).to_have_text("Total: 47.00")
    confirm.get_by_role("button", name="Reject 2").click()
    expect(fran.get_by_role("dialog", name="2 of 2 rejected")).to_be_visible()
