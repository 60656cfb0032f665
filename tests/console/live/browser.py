"""Helpers of the browser tests: a real daphne serving the test database, a headless Chromium.

The server is a separate process (inline runner inside it, like ``make demo``), pointed at the
database pytest-django created; the browser is the Debian ``chromium`` driven by Playwright.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from django.conf import settings
from django.db import connections
from playwright.sync_api import Browser, FloatRect, Page, ViewportSize, expect

from agent_core.actors import actor_for_user
from agent_core.engine import runs
from agent_core.models import Run, ToolCall
from tests.conftest import leave_in_doubt
from tests.live.server import Server, start_server

# `make test` (scripts/browser.py) sets AIRLOCK_CHROMIUM to the browser it found or installed.
CHROMIUM = os.environ.get("AIRLOCK_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
T = TypeVar("T")


def start_console_server(log: Path, **extra: str) -> Server:
    """daphne serving ``config.asgi`` with the test settings, static files and this test's
    approval policy, on the test database (the inline runner runs inside it); ``extra``: more
    of its environment."""
    environment = {
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "SERVE_STATIC": "1",
        "AIRLOCK_TEST_APPROVAL_POLICY": settings.AGENT["APPROVAL_POLICY"],
        **extra,
    }
    return start_server(log, **environment)


def in_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run ORM work outside Playwright's event loop (Django refuses it inside), and close the
    thread's connection so the test database can be flushed."""

    def work() -> T:
        try:
            return fn(*args, **kwargs)
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(work).result()


LAPTOP: ViewportSize = {"width": 1280, "height": 860}
DESKTOP: ViewportSize = {"width": 1280, "height": 800}  # the manual's screenshots
PHONE: ViewportSize = {"width": 390, "height": 844}
CAMPAIGN = '/call send_campaign {"campaign_id": "spring-sale"}'
# What a finger can press: links, buttons, fields and the summaries that open details.
TARGETS = ", ".join(
    f"{kind}:visible" for kind in ("a[href]", "button", "input", "select", "textarea", "summary")
)


def touchable(box: FloatRect | None) -> bool:
    """At least 44 px wide and high: the touch target WCAG 2.5.5 asks for."""
    return box is not None and box["width"] >= 44 and box["height"] >= 44


def too_small_to_touch(page: Page) -> list[str]:
    """The page's targets on screen under 44 px wide or high, each with its box. The skip link,
    off screen until a keyboard focuses it, is not a finger's."""
    small = []
    for target in page.locator(TARGETS).all():
        box = target.bounding_box()
        if box is not None and box["x"] + box["width"] > 0 and not touchable(box):
            small.append(f"{target.evaluate('e => e.outerHTML.slice(0, 90)')} {box}")
    return small


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
    """Wait until the page's live socket is open."""
    expect(page.locator("body")).to_have_attribute("data-socket", "open")


def start(people: dict[str, Any], message: str, username: str = "alice") -> Run:
    """Start a turn in this process; it parks on its approval (the sync runner drives it)."""

    def go() -> Run:
        who = actor_for_user(people[username])
        run = runs.start_run(agent="support", message=message, actor=who)
        run.refresh_from_db()
        return run

    return in_thread(go)


def call_of(run: Run) -> ToolCall:
    """The run's one tool call."""
    return in_thread(lambda: ToolCall.objects.get(run_id=run.pk))


def card(page: Page, call: ToolCall) -> Any:
    """The call's card on the page."""
    return page.locator(f'[data-card="{call.pk}"]')


def row(page: Page, call: ToolCall) -> Any:
    """The call's row in the inbox's list."""
    return page.locator(f'[data-row="{call.pk}"]')


def open_card(page: Page, call: ToolCall) -> Any:
    """Open the call's row into its card (fetched on opening) and return the card."""
    # The inbox's script is deferred: a click before it ran follows the row's link to the card's
    # own page, without the list (a freshly logged-in page, once in CI).
    page.wait_for_load_state("domcontentloaded")
    row(page, call).locator("[data-open]").click()
    opened = card(page, call)
    expect(opened).to_be_visible()
    return opened


def put_in_doubt(call: ToolCall, approver: Any) -> None:
    """Leave ``call`` in doubt, approved by the user ``approver`` (outside the browser's loop)."""
    in_thread(lambda: leave_in_doubt(call.pk, actor_for_user(approver)))
