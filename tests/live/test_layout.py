"""The production layout of the manual (docs/howto/production.md), as real processes: gunicorn
(web), uvicorn (streams), a Celery worker and beat, with the durable runner and persistent
database connections; one approval cycle through them."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from django.conf import settings
from httpx_sse import connect_sse

from agent_core.models import StreamFrame
from tests.conftest import REFUND
from tests.live.conftest import ALICE
from tests.live.test_websocket import _receive_all, _ws_url
from tests.processes import django_env

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
BLOCK = re.compile(r"^```sh production\n(.*?)^```$", re.MULTILINE | re.DOTALL)
GUARD_SECONDS = 90  # a hang guard, not a timing assertion


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def readme_layout(web: int, streams: int) -> dict[str, list[str]]:
    """The manual's four commands (kind -> argv), for this repository's project (``config``),
    on free ports, and smaller than a real deployment (this machine has two cores)."""
    [block] = BLOCK.findall((REPO / "docs" / "howto" / "production.md").read_text())
    commands = {}
    for line in block.strip().splitlines():
        command, kind = (part.strip() for part in line.split("#"))
        for documented, here in [
            ("mysite", "config"),
            ("127.0.0.1:8000", f"127.0.0.1:{web}"),
            ("--port 8001", f"--port {streams}"),
            ("--workers 4", "--workers 2"),
            ("--concurrency 8", "--concurrency 2"),
        ]:
            command = command.replace(documented, here)
        commands[kind] = command.split()
    assert set(commands) == {"web", "streams", "workers", "beat"}, commands
    return commands


@dataclass
class Layout:
    web: str
    streams: str
    procs: dict[str, subprocess.Popen[bytes]]
    logs: Path

    def tail(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
            for p in sorted(self.logs.glob("*.log"))
        )


def _wait_until_up(url: str, layout: Layout) -> None:
    deadline = time.monotonic() + GUARD_SECONDS
    while True:
        try:
            httpx.get(f"{url}/agent/runs", timeout=30)  # 401 without an actor: it answers
            return
        except httpx.TransportError:
            if time.monotonic() > deadline or any(
                p.poll() is not None for p in layout.procs.values()
            ):
                raise AssertionError(f"{url} did not start\n{layout.tail()}") from None
            time.sleep(0.2)


@pytest.fixture
def layout(shop: None, tmp_path: Path) -> Iterator[Layout]:
    redis.Redis.from_url(settings.REDIS_URL).flushdb()
    web, streams = free_port(), free_port()
    env = django_env(
        DJANGO_SETTINGS_MODULE="tests.live.settings", AGENT_RUNNER="durable", CONN_MAX_AGE="60"
    )
    found = Layout(f"http://127.0.0.1:{web}", f"http://127.0.0.1:{streams}", {}, tmp_path)
    try:
        for kind, (program, *args) in readme_layout(web, streams).items():
            with (tmp_path / f"{kind}.log").open("wb") as log:
                # cwd: the temporary directory, where beat writes its schedule file.
                found.procs[kind] = subprocess.Popen(
                    [str(BIN / program), *args],
                    cwd=tmp_path,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
        _wait_until_up(found.web, found)
        _wait_until_up(found.streams, found)
        yield found
    finally:
        for proc in found.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in found.procs.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _frames(stream: Any) -> Iterator[tuple[str, int | None, dict[str, Any]]]:
    for sse in stream.iter_sse():
        yield sse.event, int(sse.id) if sse.id else None, json.loads(sse.data or "{}")


def test_an_approval_cycle_runs_through_the_documented_production_layout(layout: Layout) -> None:
    with (
        httpx.Client(base_url=layout.web, timeout=GUARD_SECONDS) as web,
        httpx.Client(base_url=layout.streams, timeout=GUARD_SECONDS) as streams,
    ):
        started = web.post(
            "/agent/chat", json={"agent": "support", "message": REFUND}, headers=ALICE
        )
        assert started.status_code == 202, started.text
        run_id = started.json()["run_id"]
        seqs, kinds = [], []
        with connect_sse(streams, "GET", f"/agent/chat/{run_id}/stream", headers={**ALICE}) as sse:
            for event, seq, data in _frames(sse):
                if event in ("done", "error"):
                    assert (event, data) == ("done", {"status": "completed"}), layout.tail()
                    break
                if seq is None:
                    continue
                seqs.append(seq)
                kinds.append(data["kind"])
                if data["kind"] == "approval-requested":  # the worker parked the run
                    decided = web.post(
                        "/agent/tool-call/approve",
                        json={"tool_call_id": data["tool_call_id"]},
                        headers=ALICE,
                    )
                    assert decided.status_code == 200, decided.text
    assert seqs == list(range(1, len(seqs) + 1))
    assert StreamFrame.objects.filter(run_id=run_id).count() == len(seqs)
    assert {"approval-requested", "approval-settled", "tool-output", "finish"} <= set(kinds)
    # The streams process serves the WebSocket route too: the same frames, replayed.
    messages = _receive_all(_ws_url(layout.streams, run_id), ALICE)
    assert [m["id"] for m in messages if "id" in m] == seqs
    assert all(proc.poll() is None for proc in layout.procs.values()), layout.tail()
    # The streams process writes no access log (the proxy's is the layout's): no line per stream.
    # (uvicorn logs a WebSocket's handshake apart, at INFO.)
    logged = (layout.logs / "streams.log").read_text(errors="replace")
    assert f"/agent/chat/{run_id}/stream" not in logged, layout.tail()
