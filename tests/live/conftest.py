"""Two real daphne processes on the test database, and HTTP / SSE helpers to talk to them."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from httpx_sse import connect_sse

from agent_core.choices import RunStatus
from agent_core.engine import cancel
from agent_core.models import Run
from tests.live.server import Server, start_server

ALICE = {"X-Actor-Id": "user:alice"}
BOB = {"X-Actor-Id": "user:bob"}
FRAN = {"X-Actor-Id": "user:fran", "X-Actor-Role": "finance"}
OTTO = {"X-Actor-Id": "user:otto", "X-Actor-Role": "operator,marketing"}


@pytest.fixture(scope="session")
def servers(
    django_db_setup: None, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Server, Server]]:
    """Server A (keep-alive 15 s) and server B (keep-alive 1 s), both with the inline runner."""
    logs = tmp_path_factory.mktemp("daphne")
    a = start_server(logs / "a.log")
    try:
        b = start_server(logs / "b.log", AIRLOCK_KEEPALIVE="1")
    except Exception:
        a.stop()
        raise
    yield a, b
    a.stop()
    b.stop()


@pytest.fixture(autouse=True)
def settle_runs(transactional_db: None) -> Iterator[None]:
    """After each test, let the runs it started come to rest before the tables are truncated:
    a driver mid-transaction on a server would deadlock with the flush."""
    yield
    active = [RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.CANCELLING]
    deadline = time.monotonic() + 60
    while Run.objects.filter(status__in=active).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    for run_id in Run.objects.filter(status__in=active).values_list("pk", flat=True):
        cancel.cancel_run(run_id, actor_ref="test-teardown")
    time.sleep(0.2)  # the driver that was told to stop lets go of its transaction


@pytest.fixture
def a(servers: tuple[Server, Server]) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=servers[0].url, timeout=60) as client:
        yield client


@pytest.fixture
def b(servers: tuple[Server, Server]) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=servers[1].url, timeout=60) as client:
        yield client


@dataclass(frozen=True)
class Frame:
    """One SSE event as received: ``id`` is ``None`` for ``meta`` / ``done`` / ``error``."""

    event: str
    id: int | None
    data: dict[str, Any]

    @property
    def kind(self) -> str:
        return self.data.get("kind", self.event) if self.event == "message" else self.event


def start(client: httpx.Client, message: str, actor: dict[str, str], **body: Any) -> dict[str, Any]:
    response = client.post(
        "/agent/chat", json={"agent": "support", "message": message, **body}, headers=actor
    )
    assert response.status_code == 202, response.text
    return response.json()


class Stream:
    """An open SSE connection, read event by event."""

    def __init__(self, client: httpx.Client, run_id: str, actor: dict[str, str], **kw: Any) -> None:
        # connect_sse adds its headers to the dict it is given: hand it a copy.
        headers = {**actor, **kw.pop("headers", {})}
        self._cm = connect_sse(client, "GET", f"/agent/chat/{run_id}/stream", headers=headers, **kw)
        self.source = self._cm.__enter__()
        self.response = self.source.response
        self._events = self.source.iter_sse()

    def next(self) -> Frame:
        sse = next(self._events)
        return Frame(sse.event, int(sse.id) if sse.id else None, json.loads(sse.data or "{}"))

    def until(self, kind: str) -> list[Frame]:
        """Every event up to and including the first of ``kind``."""
        frames = []
        while True:
            frame = self.next()
            frames.append(frame)
            if frame.kind == kind:
                return frames

    def close(self) -> None:
        self._cm.__exit__(None, None, None)


def read_all(client: httpx.Client, run_id: str, actor: dict[str, str], **kw: Any) -> list[Frame]:
    """Attach, read until the stream ends (``done`` or ``error``), detach."""
    stream = Stream(client, run_id, actor, **kw)
    try:
        frames = []
        while True:
            frame = stream.next()
            frames.append(frame)
            if frame.event in ("done", "error"):
                return frames
    finally:
        stream.close()
