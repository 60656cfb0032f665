"""Helpers of the browser tests: a real daphne serving the test database, a headless Chromium.

The server is a separate process (inline runner inside it, like ``make demo``), pointed at the
database pytest-django created; the browser is the Debian ``chromium`` driven by Playwright.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from django.conf import settings
from django.db import connections

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
REPO = Path(__file__).resolve().parent.parent.parent
T = TypeVar("T")


def start_console_server(log: Path) -> Server:
    """daphne serving ``config.asgi`` with the test settings, static files and this test's
    approval policy, on the test database (the inline runner runs inside it)."""
    return start_server(
        str(settings.DATABASES["default"]["NAME"]),
        log,
        DJANGO_SETTINGS_MODULE="config.settings.test",
        REDIS_URL=settings.REDIS_URL,
        AGENT_RUNNER="inline",
        SERVE_STATIC="1",
        AIRLOCK_TEST_APPROVAL_POLICY=settings.AGENT["APPROVAL_POLICY"],
    )


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
