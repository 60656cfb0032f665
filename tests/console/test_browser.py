"""The console in a real browser against a real server: live inbox, decisions, conflicts, roles.

Screenshots go to ``$SCREENSHOTS_DIR`` (``docs/screenshots`` refreshes the README's) or, by
default, to the test's temporary directory.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, ViewportSize, expect, sync_playwright

from agent_core import services
from agent_core.models import CallStatus, Run, RunStatus, ToolCall
from tests.console.browser import CHROMIUM, CHROMIUM_ARGS, Server, in_thread, start_console_server
from tests.console.conftest import REFUND, actor

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

LAPTOP: ViewportSize = {"width": 1280, "height": 860}
PHONE: ViewportSize = {"width": 390, "height": 844}
CAMPAIGN = '/call send_campaign {"campaign_id": "spring-sale"}'


@pytest.fixture
def server(people: Any, shop: None, demo_policy: None, tmp_path: Path) -> Iterator[Server]:
    """The console served as ``make demo`` serves it: the demo's approval policy (refunds need
    finance, campaigns marketing), here and in the server."""
    running = start_console_server(tmp_path / "daphne.log")
    yield running
    running.stop()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        yield launched
        launched.close()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    target = Path(os.environ.get("SCREENSHOTS_DIR") or tmp_path / "screenshots")
    target.mkdir(parents=True, exist_ok=True)
    return target


def open_as(
    browser: Browser, server: Server, username: str, viewport: ViewportSize = LAPTOP
) -> Page:
    """A fresh browser context (its own cookies) logged in through the login form."""
    context = browser.new_context(viewport=viewport, base_url=server.url)
    page = context.new_page()
    page.goto("/console/inbox/")
    expect(page).to_have_url(re.compile(r"/console/login/"))
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill("pw")
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(re.compile(r"/console/inbox/"))
    return page


def wait_live(page: Page) -> None:
    expect(page.locator("body")).to_have_attribute("data-socket", "open")


def start(people: dict[str, Any], message: str, username: str = "alice") -> Run:
    """Start a turn in this process; it parks on its approval (the sync runner drives it)."""

    def go() -> Run:
        run = services.start_run(agent="support", message=message, actor=actor(people[username]))
        run.refresh_from_db()
        return run

    return in_thread(go)


def call_of(run: Run) -> ToolCall:
    return in_thread(lambda: ToolCall.objects.get(run_id=run.pk))


def card(page: Page, call: ToolCall) -> Any:
    return page.locator(f'[data-card="{call.pk}"]')


def test_an_approver_sees_a_refund_arrive_approves_it_and_the_run_completes(
    server, browser, people, sync_runner, shots
):
    fran = open_as(browser, server, "fran")
    expect(fran.get_by_text("Nothing waits on you")).to_be_visible()
    wait_live(fran)

    refund_run = start(people, REFUND)
    campaign_run = start(people, CAMPAIGN, username="fran")
    refund = call_of(refund_run)
    refund_card = card(fran, refund)
    expect(refund_card).to_be_visible()  # arrived without a reload
    expect(refund_card).to_contain_text("finance decides")
    expect(refund_card).to_contain_text('"order_id": "A-1001"')
    expect(refund_card.locator("[data-countdown]")).to_contain_text(re.compile(r"expires in \d"))
    campaign_card = card(fran, call_of(campaign_run))
    expect(campaign_card).to_contain_text("Email “Spring sale")
    expect(campaign_card).to_contain_text("only marketing decides this")  # read-only for fran
    expect(fran.locator('[data-count="waiting_on_you"]')).to_have_text("1")
    fran.screenshot(path=shots / "inbox.png", full_page=True)

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
    expect(fran.get_by_text(f"Approved: issue_refund ({refund.pk}).")).to_be_visible()
    expect(refund_card).to_have_count(0)  # left the inbox
    expect(fran.locator('[data-count="waiting_on_you"]')).to_have_text("0")

    expect(run_page.locator("[data-run-status]")).to_have_text("completed")  # live
    expect(run_page.locator("#frames")).to_contain_text("finish")
    expect(run_page.locator(".timeline")).to_contain_text("llm:1")
    run_page.screenshot(path=shots / "run.png", full_page=True)

    refund_run = in_thread(lambda: Run.objects.get(pk=refund_run.pk))
    assert refund_run.status == RunStatus.COMPLETED
    assert in_thread(lambda: ToolCall.objects.get(pk=refund.pk).decided_via) == "console"

    fran.goto("/console/metrics/")
    expect(fran.get_by_text("approval latency, median")).to_be_visible()
    fran.screenshot(path=shots / "metrics.png", full_page=True)

    phone = open_as(browser, server, "fran", PHONE)
    expect(phone.get_by_text("Email “Spring sale")).to_be_visible()
    phone.screenshot(path=shots / "inbox-phone.png", full_page=True)


def test_an_approver_rejects_with_a_reason(server, browser, people, sync_runner):
    fran = open_as(browser, server, "fran")
    wait_live(fran)
    refund = call_of(start(people, REFUND))
    refund_card = card(fran, refund)
    refund_card.get_by_text("Reject…").click()
    refund_card.get_by_label("Reason (the agent is told)").fill("Duplicate of A-1001's refund")
    refund_card.get_by_role("button", name="Reject").click()
    expect(fran.get_by_text(f"Rejected: issue_refund ({refund.pk}).")).to_be_visible()
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
    expect(card(felix, refund)).to_be_visible()

    fran_card = card(fran, refund)
    fran_card.get_by_text("Reject…").click()
    fran_card.get_by_label("Reason (the agent is told)").fill("Not eligible")
    fran_card.get_by_role("button", name="Reject").click()
    expect(fran_card).to_have_count(0)

    stale = card(felix, refund)
    stale.get_by_role("button", name="Approve", exact=True).click()
    expect(stale.locator("[data-refusal]")).to_contain_text(
        re.compile(r"fran rejected this .* ago")
    )
    assert in_thread(lambda: ToolCall.objects.get(pk=refund.pk).status) == CallStatus.REJECTED


def test_someone_without_the_role_cannot_decide(server, browser, people, sync_runner):
    refund = call_of(start(people, REFUND))
    otto = open_as(browser, server, "otto")
    readonly = card(otto, refund)
    expect(readonly).to_contain_text("only finance decides this")
    expect(readonly.get_by_role("button", name="Approve", exact=True)).to_have_count(0)
    expect(otto.get_by_text("Nothing waits on you")).to_be_visible()

    alice = open_as_requester(browser, server)
    expect(alice.get_by_text("No access to the console")).to_be_visible()
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
