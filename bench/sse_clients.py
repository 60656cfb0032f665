"""The streams benchmark's SSE clients: plain asyncio protocols, many per process, that time the
stamped frames of one run's stream (``bench/streams.py`` starts them in processes of their own)."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

ACTOR = {"X-Actor-Id": "bench:reader"}

# Subscribers per client process (``--per-client``). The clients are plain asyncio protocols that
# look for the frames' ``"t":`` stamps in what arrives (no HTTP library, no per-line parsing), so
# they cost the machine far less CPU than the server they measure; their CPU time is printed.
PER_CLIENT = 500
_STAMP = re.compile(rb'"t":([0-9.]+)')


class _Subscriber(asyncio.Protocol):
    """One SSE stream of the run: records the latency of each stamped frame it receives."""

    def __init__(self, request: bytes, samples: list[float], group: _Group) -> None:
        self.request, self.samples, self.group = request, samples, group
        self.buffer = b""
        self.attached = self.warm = False
        self.closed = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        arrived = time.time()
        self.buffer += data
        end = self.buffer.rfind(b"\n\n")
        if end < 0:
            return
        events, self.buffer = self.buffer[:end], self.buffer[end + 2 :]
        if not self.attached:
            assert events.startswith(b"HTTP/1.1 200"), events[:200]
            self.attached = True
            self.group.arrived("attached")
        for stamp in _STAMP.findall(events):
            self.samples.append((arrived - float(stamp)) * 1000)
        if not self.warm and b"warm-up" in events:
            self.warm = True
            self.group.arrived("warm")

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed.set_result(None)


class _Group:
    """Tells the benchmark once every subscriber of this client process is attached / warm."""

    def __init__(self, n: int, ready: Any) -> None:
        self.n, self.ready = n, ready
        self.counts = {"attached": 0, "warm": 0}
        self.started = time.time()

    def arrived(self, what: str) -> None:
        self.counts[what] += 1
        if self.counts[what] == self.n:
            self.ready((what, time.time(), self.started))


async def _subscribe_all(url: str, run_id: str, n: int, ready: Any) -> tuple[list[float], float]:
    """``n`` SSE clients of the run: ``ready(("attached", t))`` once all have their response
    headers and ``meta``, ``ready(("warm", t))`` once all have the warm-up frame (every stream
    has replayed the table and follows live); then per-frame latencies (ms) until the run ends,
    and this process's CPU seconds."""
    host, port = url.removeprefix("http://").split(":")
    request = (
        f"GET /agent/chat/{run_id}/stream HTTP/1.1\r\nHost: {host}\r\n"
        f"X-Actor-Id: {ACTOR['X-Actor-Id']}\r\nConnection: close\r\n\r\n"
    ).encode()
    samples: list[float] = []
    group = _Group(n, ready)
    loop = asyncio.get_running_loop()
    cpu = time.process_time()
    subscribers = []
    for _ in range(n):
        _, subscriber = await loop.create_connection(
            lambda: _Subscriber(request, samples, group), host, int(port)
        )
        subscribers.append(subscriber)
    await asyncio.gather(*(s.closed for s in subscribers))
    return samples, time.process_time() - cpu


def run_clients(url: str, run_id: str, n: int, ready: Any, results: Any) -> None:
    results.put(asyncio.run(_subscribe_all(url, run_id, n, ready.put)))
