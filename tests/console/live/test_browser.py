"""The console in a real browser against a real server: live inbox, decisions, conflicts, roles.

Screenshots go to ``$SCREENSHOTS_DIR`` (``docs/screenshots`` refreshes the README's) or, by
default, to the test's temporary directory.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Browser, Page, expect

from agent_core.choices import CallStatus, RunStatus
from agent_core.models import Run, ToolCall
from approvals import analytics
from tests.console.conftest import REFUND
from tests.console.live.browser import (
    CAMPAIGN,
    LAPTOP,
    PHONE,
    Server,
    call_of,
    in_thread,
    open_as,
    open_card,
    row,
    start,
    wait_live,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_an_approver_sees_a_refund_arrive_approves_it_and_the_run_completes(
    server, browser, people, sync_runner, shots
):
    fran = open_as(browser, server, "fran")
    expect(fran.get_by_text("Nothing waits on you")).to_be_visible()
    wait_live(fran)

    refund_run = start(people, REFUND)
    campaign_run = start(people, CAMPAIGN, username="fran")
    refund = call_of(refund_run)
    expect(row(fran, refund)).to_contain_text("Refund 25.00 on order A-1001")  # without a reload
    expect(fran.locator('[data-count="waiting_on_you"]')).to_have_text(["1", "1"])  # nav, tab
    fran.get_by_role("link", name=re.compile("Waiting on others")).click()
    campaign_card = open_card(fran, call_of(campaign_run))
    expect(campaign_card).to_contain_text("Email “Spring sale")
    expect(campaign_card).to_contain_text("only marketing decides this")  # read-only for fran
    fran.get_by_role("link", name=re.compile("Waiting on you")).click()
    refund_card = open_card(fran, refund)
    expect(refund_card).to_contain_text("finance decides")
    expect(refund_card.locator("[data-summary]")).to_have_text(
        "Refund 25.00 on order A-1001 — maria@example.com, order total 59.90"
    )
    expect(refund_card).to_contain_text('"order_id": "A-1001"')
    expect(refund_card.locator("[data-countdown]")).to_contain_text(re.compile(r"expires in \d"))

    deadline = refund_card.locator("[data-countdown]").get_attribute("data-countdown")
    refund_card.get_by_text("Extend the deadline…").click()
    refund_card.get_by_label("Extend by").select_option("1h")
    refund_card.get_by_role("button", name="Extend").click()
    expect(fran.get_by_text(re.compile(r"Extended until .*: issue_refund"))).to_be_visible()
    expect(refund_card.locator("[data-countdown]")).not_to_have_attribute(
        "data-countdown", deadline or ""
    )
    expect(refund_card.locator("[data-countdown]")).to_contain_text(
        re.compile(r"expires in 1 h \d+ min")
    )

    run_page = fran.context.new_page()
    run_page.goto(f"/console/runs/{refund_run.pk}/")
    wait_live(run_page)
    expect(run_page.locator("[data-run-status]")).to_have_text("waiting")

    refund_card.get_by_role("button", name="Approve", exact=True).click()
    expect(fran.get_by_text(f"Approved: issue_refund — {refund.summary}.")).to_be_visible()
    expect(refund_card).to_have_count(0)  # left the inbox
    expect(fran.locator('[data-count="waiting_on_you"]')).to_have_text(["0", "0"])  # nav, tab

    # The run completes in the live server's runner: a wait, not a timing (slow under CI's load).
    expect(run_page.locator("[data-run-status]")).to_have_text("completed", timeout=20_000)  # live
    expect(run_page.locator("#frames")).to_contain_text("finish")
    expect(run_page.locator(".timeline")).to_contain_text("llm:1")
    run_page.screenshot(path=shots / "run.png", full_page=True)

    refund_run = in_thread(lambda: Run.objects.get(pk=refund_run.pk))
    assert refund_run.status == RunStatus.COMPLETED
    assert in_thread(lambda: ToolCall.objects.get(pk=refund.pk).decided_via) == "console"

    in_thread(analytics.refresh_due)  # the sweeper's job: the page reads its snapshot
    fran.goto("/console/metrics/")
    expect(fran.get_by_text("approval latency, median")).to_be_visible()
    fran.screenshot(path=shots / "metrics.png", full_page=True)

    bigger = call_of(start(people, REFUND.replace("25", "120").replace("A-1001", "A-1002")))
    second = call_of(start(people, REFUND))
    start(people, '/call purge_cache {"path": "/products"}', username="fran")
    fran.goto("/console/inbox/")
    open_card(fran, bigger)
    fran.screenshot(path=shots / "inbox.png", full_page=True)
    phone = open_as(browser, server, "fran", PHONE)
    open_card(phone, second)
    expect(phone.get_by_text("Refund 120.00 on order A-1002")).to_be_visible()
    assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    phone.screenshot(path=shots / "inbox-phone.png", full_page=True)


def test_an_approver_rejects_with_a_reason(server, browser, people, sync_runner):
    fran = open_as(browser, server, "fran")
    wait_live(fran)
    refund = call_of(start(people, REFUND))
    refund_card = open_card(fran, refund)
    refund_card.get_by_text("Reject…").click()
    refund_card.get_by_label("Reason (the agent is told)").fill("Duplicate of A-1001's refund")
    refund_card.get_by_role("button", name="Reject").click()
    expect(fran.get_by_text(f"Rejected: issue_refund — {refund.summary}.")).to_be_visible()
    expect(refund_card).to_have_count(0)
    decided = in_thread(lambda: ToolCall.objects.get(pk=refund.pk))
    assert decided.status == CallStatus.REJECTED
    assert decided.reason == "Duplicate of A-1001's refund"


def test_a_second_operators_stale_card_shows_the_conflict(server, browser, people, sync_runner):
    refund = call_of(start(people, REFUND))
    fran = open_as(browser, server, "fran")
    felix = open_as(browser, server, "felix")
    # felix's page hears nothing live (a slow network), so his card goes stale.
    felix.route_web_socket(re.compile(r".*/console/ws/.*"), lambda ws: None)
    felix.reload()
    stale = open_card(felix, refund)

    fran_card = open_card(fran, refund)
    fran_card.get_by_text("Reject…").click()
    fran_card.get_by_label("Reason (the agent is told)").fill("Not eligible")
    fran_card.get_by_role("button", name="Reject").click()
    expect(fran_card).to_have_count(0)

    stale.get_by_role("button", name="Approve", exact=True).click()
    expect(stale.locator("[data-refusal]")).to_contain_text(
        re.compile(r"fran rejected this .* ago")
    )
    assert in_thread(lambda: ToolCall.objects.get(pk=refund.pk).status) == CallStatus.REJECTED


def test_someone_without_the_role_cannot_decide(server, browser, people, sync_runner):
    refund = call_of(start(people, REFUND))
    otto = open_as(browser, server, "otto")
    expect(otto.get_by_text("Nothing waits on you")).to_be_visible()
    otto.goto("/console/inbox/?show=others")
    readonly = open_card(otto, refund)
    expect(readonly).to_contain_text("only finance decides this")
    expect(readonly.get_by_role("button", name="Approve", exact=True)).to_have_count(0)
    expect(row(otto, refund).locator("[data-select]")).to_have_count(0)

    alice = open_as_requester(browser, server)  # her own refund: she sees it, finance decides
    expect(alice.get_by_text("Nothing waits on you")).to_be_visible()
    alice.goto("/console/inbox/?show=others")
    hers = open_card(alice, refund)
    expect(hers).to_contain_text("only finance decides this")
    expect(hers.get_by_role("button", name="Approve", exact=True)).to_have_count(0)
    assert (
        in_thread(lambda: ToolCall.objects.get(pk=refund.pk).status) == CallStatus.PENDING_APPROVAL
    )


def open_as_requester(browser: Browser, server: Server) -> Page:
    page = browser.new_context(viewport=LAPTOP, base_url=server.url).new_page()
    page.goto("/console/login/")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("pw")
    page.get_by_role("button", name="Log in").click()
    return page
