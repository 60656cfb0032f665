"""Helpers of the browser tests: a real daphne serving the test database, a headless Chromium.

The server is a separate process (inline runner inside it, like ``make demo``), pointed at the
database pytest-django created; the browser is the Debian ``chromium`` driven by Playwright.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from django.conf import settings
from django.db import connections

CHROMIUM = "/usr/bin/chromium"
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


def database_url() -> str:
    """The URL of the database this test run uses (the test database, maybe over a socket)."""
    db = settings.DATABASES["default"]
    auth = quote(db.get("USER") or "", safe="")
    if db.get("PASSWORD"):
        auth += ":" + quote(db["PASSWORD"], safe="")
    host = quote(db.get("HOST") or "", safe="")
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return f"postgres://{auth}@{host}{port}/{quote(db['NAME'], safe='')}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Server:
    """``daphne config.asgi:application`` on a free port, with the test run's services and
    approval policy."""

    def __init__(self, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings.test",
            "DATABASE_URL": database_url(),
            "REDIS_URL": settings.REDIS_URL,
            "AGENT_RUNNER": "inline",
            "SERVE_STATIC": "1",
            "AIRLOCK_TEST_APPROVAL_POLICY": settings.AGENT["APPROVAL_POLICY"],
        }
        daphne = Path(sys.executable).parent / "daphne"
        self._log = log.open("wb")
        self.process = subprocess.Popen(
            [str(daphne), "-b", "127.0.0.1", "-p", str(self.port), "config.asgi:application"],
            cwd=REPO,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self.log_path = log
        self._wait_ready()

    def _wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"daphne exited: {self.log_path.read_text()}")
            try:
                urllib.request.urlopen(self.url + "/console/login/", timeout=2).close()
                return
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.2)
        raise RuntimeError(f"daphne did not start: {self.log_path.read_text()}")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log.close()


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
