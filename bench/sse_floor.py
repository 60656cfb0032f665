"""The floor of ``bench/streams.py``'s fan-out: a bare ASGI app, no Django, no Redis, no database.

Every ``GET …/stream`` gets ``event: meta`` and then each block of bytes ``POST``ed to the app (the
benchmark's stamped frames, encoded as the stream encodes them), handed from one in-memory queue
per connection; an empty ``POST`` ends every stream. Served by the same server as the real
streams, read by the same clients: what is left of the latency is the server, the clients and
the machine.
"""

from __future__ import annotations

import asyncio
from typing import Any

_streams: set[asyncio.Queue[bytes]] = set()


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (message := await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    if scope["method"] == "POST":
        block = b""
        while True:
            message = await receive()
            block += message.get("body", b"")
            if not message.get("more_body"):
                break
        for queue in _streams:
            queue.put_nowait(block)
        await _answer(send, 204)
    elif scope["path"].endswith("/stream"):
        await _stream(send)
    else:
        await _answer(send, 404)


async def _stream(send: Any) -> None:
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    _streams.add(queue)
    try:
        headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send(
            {"type": "http.response.body", "body": b"event: meta\ndata: {}\n\n", "more_body": True}
        )
        while block := await queue.get():
            await send({"type": "http.response.body", "body": block, "more_body": True})
        await send({"type": "http.response.body", "body": b"event: done\ndata: {}\n\n"})
    finally:
        _streams.discard(queue)


async def _answer(send: Any, status: int) -> None:
    await send({"type": "http.response.start", "status": status, "headers": []})
    await send({"type": "http.response.body", "body": b""})
