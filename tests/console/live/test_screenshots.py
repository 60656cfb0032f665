"""The console's manual pictures (docs/howto/console.md), taken from a real browser on a
desktop (1280 by 800) and a phone (390 by 844): the inbox, and a card open with its related
calls and an edit under review. Each picture is of a state the test checks, and axe checks it too.

``SCREENSHOTS_DIR=docs/screenshots`` writes them where the manual reads them (``presence-*``
come from test_presence.py, ``mine-*`` from test_requesters.py)."""

from __future__ import annotations

import json
import re

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import expect

from tests.console.live.browser import DESKTOP, PHONE, call_of, open_as, open_card, start
from tests.console.live.test_busy_operator import _serious

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _refund(people, order: str, amount: int, username: str = "alice"):
    message = f'/call issue_refund {{"order_id": "{order}", "amount": {amount}}}'
    return call_of(start(people, message, username=username))


def test_the_inbox_and_a_card_with_its_context_and_an_edit_under_review(
    server, browser, people, sync_runner, shots
):
    first = _refund(people, "A-1001", 25)
    _refund(people, "A-1001", 30)
    _refund(people, "A-1001", 30, username="bob")  # a duplicate
    _refund(people, "A-1002", 22, username="bob")
    start(people, '/call purge_cache {"path": "/sale"}', username="fran")
    axe = Axe()
    for viewport in (DESKTOP, PHONE):
        size = viewport["width"]
        fran = open_as(browser, server, "fran", viewport)
        expect(fran.locator("[data-row]")).to_have_count(5)
        fran.screenshot(path=shots / f"inbox-{size}.png")
        opened = open_card(fran, first)
        expect(opened.locator("[data-related-total]")).to_have_text("Sum with this call: 85.00")
        opened.get_by_text("Edit arguments, then approve…").click()
        edited = {"order_id": "A-1001", "amount": "20.00", "reason": "damaged in transit"}
        opened.get_by_label(re.compile("Arguments")).fill(json.dumps(edited))
        opened.get_by_role("button", name="Review the changes…").click()
        diff = opened.locator("[data-edit-preview]")
        expect(diff.locator('[data-change="amount"]')).to_contain_text('"20.00"')
        assert _serious(axe, fran) == [], size
        opened.locator("[data-related]").scroll_into_view_if_needed()
        fran.evaluate("window.scrollBy(0, -60)")
        fran.screenshot(path=shots / f"card-{size}.png")
        fran.context.close()
