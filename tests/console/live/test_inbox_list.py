"""The inbox as a list that scales, in a real browser against a real server (issue #19): pages,
orders, search, summaries, bulk decisions, and live updates that move one row, not the page."""

from __future__ import annotations

import re
from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import expect

from agent_core.choices import CallStatus
from agent_core.models import ToolCall
from approvals import services as port
from tests.conftest import wait_for
from tests.console.conftest import REFUND, actor, copies_of
from tests.console.live.browser import (
    PHONE,
    call_of,
    in_thread,
    open_as,
    open_card,
    row,
    start,
    wait_live,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PAGE_BYTES = 100_000  # the first page of the inbox, whatever its length
UPDATE_BYTES = 5_000  # what a live update moves, per changed card
PURGE = '/call purge_cache {"path": "/sale"}'


def test_the_list_pages_sorts_searches_and_shows_summaries(server, browser, people, sync_runner):
    refund = call_of(start(people, REFUND))
    copies = in_thread(copies_of, refund, 54)
    fran = open_as(browser, server, "fran")
    response = fran.goto("/console/inbox/")
    assert response is not None and len(response.body()) <= PAGE_BYTES
    rows = fran.locator("[data-row]")
    expect(rows).to_have_count(50)
    first = rows.first
    expect(first).to_have_attribute("data-row", refund.pk)  # oldest first
    expect(first).to_contain_text("Refund 25.00 on order A-1001 — maria@example.com")
    expect(first).not_to_contain_text("order_id")  # the summary, not the raw arguments
    fran.get_by_role("link", name="Next page →").click()
    expect(rows).to_have_count(5)
    expect(rows.last).to_have_attribute("data-row", copies[-1].pk)
    fran.get_by_role("link", name="← First page").click()
    expect(rows).to_have_count(50)
    fran.get_by_label("Sort", exact=True).select_option("newest")
    fran.get_by_role("button", name="Apply").click()
    expect(rows.first).to_have_attribute("data-row", copies[-1].pk)
    fran.get_by_label("Search", exact=True).fill("Refund 7.00")
    fran.get_by_role("button", name="Apply").click()
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-row", copies[6].pk)
    fran.goto("/console/inbox/")
    fran.get_by_text("Filter", exact=True).click()
    fran.get_by_label("Tool", exact=True).fill("purge_cache")
    fran.get_by_role("button", name="Apply").click()
    expect(fran.get_by_text("Nothing waits on you with these filters")).to_be_visible()


def test_a_live_update_moves_one_row_of_a_few_kilobytes(server, browser, people, sync_runner):
    first = call_of(start(people, REFUND))
    fran = open_as(browser, server, "fran")
    received: list[int] = []
    fran.on("websocket", lambda ws: ws.on("framereceived", lambda f: received.append(len(f))))
    fran.reload()
    wait_live(fran)
    fetched: list[Any] = []
    # Chromium asks for the favicon when it likes, sometimes after the page settled: a static
    # file the browser caches is not what a live update moves.
    fran.on(
        "requestfinished",
        lambda request: None if "/static/" in request.url else fetched.append(request),
    )
    second = call_of(start(people, REFUND))  # arrives
    expect(row(fran, second)).to_be_visible()
    in_thread(lambda: port.approve(first.pk, actor=actor(people["felix"]), via="api"))  # leaves
    expect(row(fran, first)).to_have_count(0)
    expect(fran.locator('[data-count="waiting_on_you"]')).to_have_text(["1", "1"])  # nav, tab
    urls = [r.url for r in fetched]
    assert not any("/inbox/" in u for u in urls), urls  # never the whole list again
    assert all("/row/" in u for u in urls), urls
    sizes = [r.sizes() for r in fetched]
    moved = sum(received) + sum(
        s["requestHeadersSize"] + s["responseHeadersSize"] + s["responseBodySize"] for s in sizes
    )
    assert moved <= 2 * UPDATE_BYTES, (moved, received, sizes)  # two cards changed


def test_bulk_approve_confirms_and_reports_each_card(server, browser, people, sync_runner):
    calls = [call_of(start(people, REFUND)) for _ in range(3)]
    purge = call_of(start(people, PURGE, username="fran"))
    fran = open_as(browser, server, "fran")
    wait_live(fran)
    status = fran.locator("[data-bulk-status]")
    approve_selected = fran.get_by_role("button", name="Approve selected…")
    expect(approve_selected).to_be_disabled()
    row(fran, purge).locator("[data-select]").check()
    row(fran, calls[0]).locator("[data-select]").check()
    expect(status).to_have_text("Select calls of one tool (now: issue_refund, purge_cache).")
    expect(approve_selected).to_be_disabled()
    row(fran, purge).locator("[data-select]").uncheck()
    for call in calls[1:]:
        row(fran, call).locator("[data-select]").check()
    expect(status).to_have_text("3 selected: issue_refund")
    approve_selected.click()
    dialog = fran.get_by_role("dialog", name="Approve these 3 calls?")
    expect(dialog).to_be_visible()
    expect(dialog.locator("[data-confirm-id]")).to_have_count(3)
    expect(dialog).to_contain_text("Refund 25.00 on order A-1001")
    assert _serious(Axe(), fran) == []
    # Meanwhile felix rejects one of them.
    in_thread(lambda: port.reject(calls[1].pk, actor=actor(people["felix"]), reason="dup"))
    dialog.get_by_role("button", name="Approve 3").click()
    results = fran.get_by_role("dialog", name="2 of 3 approved")
    expect(results).to_be_visible()
    expect(results.locator(f'[data-result-id="{calls[1].pk}"]')).to_contain_text(
        re.compile(r"felix rejected this .* ago.*Not sent\.")
    )
    expect(results.locator(f'[data-result-id="{calls[0].pk}"]')).to_contain_text("Approved.")
    results.get_by_role("button", name="Close").click()
    for call in calls:
        expect(row(fran, call)).to_have_count(0)
    expect(row(fran, purge)).to_be_visible()
    # An approved call's tool runs after the answer reaches the page: wait for it to finish.
    expected = [CallStatus.SUCCEEDED, CallStatus.REJECTED, CallStatus.SUCCEEDED]

    def statuses() -> list[str]:
        return [ToolCall.objects.get(pk=c.pk).status for c in calls]

    in_thread(lambda: wait_for("the approved refunds to run", lambda: statuses() == expected))


def test_the_list_a_card_and_a_bulk_confirmation_fit_a_phone(server, browser, people, sync_runner):
    refund = call_of(start(people, REFUND))
    phone = open_as(browser, server, "fran", PHONE)
    open_card(phone, refund)
    row(phone, refund).locator("[data-select]").check()
    phone.get_by_role("button", name="Approve selected…").click()
    expect(phone.get_by_role("dialog", name="Approve this call?")).to_be_visible()
    width = phone.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"the inbox is {width} px wide at {PHONE['width']} px"


def _serious(axe: Axe, page: Any) -> list[str]:
    violations = axe.run(page).response["violations"]
    return [v["id"] for v in violations if v["impact"] in ("serious", "critical")]
