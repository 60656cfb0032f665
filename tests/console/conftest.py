"""Console fixtures: policies (refunds to finance; the demo's), logins as ``people``, a console
server and a browser."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import override_settings
from playwright.sync_api import Browser, sync_playwright

from agent_core.actors import Actor, actor_for_user
from agent_core.models import Run, ToolCall
from tests.console.browser import CHROMIUM, CHROMIUM_ARGS, Server, start_console_server

FINANCE_POLICY = "tests.console.policy.FinancePolicy"
DEMO_POLICY = "demo.policy.DemoPolicy"
REFUND = '/call issue_refund {"order_id": "A-1001", "amount": 25}'


def actor(user: User) -> Actor:
    return actor_for_user(user)


@pytest.fixture
def finance_policy() -> Iterator[None]:
    with override_settings(AGENT={**settings.AGENT, "APPROVAL_POLICY": FINANCE_POLICY}):
        yield


@pytest.fixture
def demo_policy() -> Iterator[None]:
    """The policy ``make demo`` runs: refunds need finance, campaigns marketing, purges the
    requester."""
    with override_settings(AGENT={**settings.AGENT, "APPROVAL_POLICY": DEMO_POLICY}):
        yield


@pytest.fixture
def refund(turn: Callable[..., Run], people: dict[str, User], finance_policy: None) -> ToolCall:
    """A pending refund that waits on finance, requested by alice."""
    run = turn(REFUND, actor=actor(people["alice"]))
    return ToolCall.objects.get(run=run, tool_name="issue_refund")


@pytest.fixture
def login(client: Any, people: dict[str, User]) -> Callable[[str], Any]:
    def as_user(name: str) -> Any:
        client.force_login(people[name])
        return client

    return as_user


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
