"""The approve benchmark's client: concurrent deciders on one asyncio loop, HTTP/1.1 by hand.

Fifty ``http.client`` threads in one process cost the client ~1 ms of CPU per request and queue
each other behind the GIL, so part of what they measured was the client. Here every decider is a
coroutine with its own kept-alive connection (reopened when the server closes it); the client's
CPU per request is measured and printed next to the results.

Two loads:

- **closed loop**: each decider sends its next decision as soon as the last one is answered, the
  most the server can take; with ``n`` deciders the latency is ``n / throughput`` on average
  (Little's law), whatever the server does with its time;
- **open loop** at ``rate`` decisions/s: decider ``i`` sends its ``k``-th decision at
  ``(k * n + i) / rate`` seconds (or when its previous one is answered, if later); latency counts
  from the planned time, so a server that falls behind is charged for the wait too.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass

PATH = "/agent/tool-call/approve"


@dataclass
class Batch:
    """What one batch measured: latencies (s), wall time (s), the client's CPU (s), statuses."""

    samples: list[float]
    wall: float
    client_cpu: float
    errors: list[int]


class _Connection:
    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, payload: bytes) -> int:
        for attempt in range(2):
            if self.writer is None:
                self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
            assert self.reader is not None
            try:
                self.writer.write(payload)
                head = await self.reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                # The server closed a kept-alive connection: a decision is repeatable (unchanged).
                await self.close()
                if attempt:
                    raise
                continue
            lines = head.decode("latin-1").split("\r\n")
            headers = dict(line.lower().split(": ", 1) for line in lines[1:] if ": " in line)
            await self.reader.readexactly(int(headers.get("content-length", "0")))
            if headers.get("connection") == "close":
                await self.close()
            return int(lines[0].split(" ", 2)[1])
        raise AssertionError("unreachable")

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = self.reader = None


def _payload(path: str, token: str, call_id: str) -> bytes:
    body = json.dumps({"tool_call_id": call_id}).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Token {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _run(
    port: int, token: str, call_ids: list[str], deciders: int, rate: float | None, path: str
) -> Batch:
    slices = [call_ids[i::deciders] for i in range(deciders)]
    samples: list[float] = []
    errors: list[int] = []
    start = time.perf_counter() + 0.05

    async def decider(i: int, ids: list[str]) -> None:
        connection = _Connection(port)
        for k, call_id in enumerate(ids):
            # Closed loop: at once, but never before the batch's start, from which the
            # latencies and the wall time are counted.
            planned = start + (k * deciders + i) / rate if rate else max(start, time.perf_counter())
            await asyncio.sleep(max(0.0, planned - time.perf_counter()))
            status = await connection.request(_payload(path, token, call_id))
            samples.append(time.perf_counter() - planned)
            if status != 200:
                errors.append(status)
        await connection.close()

    cpu = time.process_time()
    await asyncio.gather(*(decider(i, ids) for i, ids in enumerate(slices)))
    return Batch(samples, time.perf_counter() - start, time.process_time() - cpu, errors)


def decide(
    port: int,
    token: str,
    call_ids: list[str],
    *,
    deciders: int = 50,
    rate: float | None = None,
    path: str = PATH,
) -> Batch:
    """Decide ``call_ids`` with ``deciders`` concurrent clients; ``rate``: open loop."""
    return asyncio.run(_run(port, token, call_ids, deciders, rate, path))
