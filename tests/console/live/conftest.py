"""Fixtures of the console's tests against a live server: the console served by daphne, and a
headless Chromium."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, sync_playwright

from tests.console.live.browser import CHROMIUM, CHROMIUM_ARGS, Server, start_console_server


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
