"""``/agent/chat/<run_id>/ws``: the same frames as the SSE stream, over a WebSocket (read-only).

Messages: ``{"event": "meta", "data": …}``, ``{"id": n, "data": {"kind": …}}``, then
``{"event": "done", "data": …}`` or ``{"event": "error", "data": {"code", "message"}}``; the
server closes after the last. A handshake without an actor, for a run the actor may not see (or
that does not exist), or with a bad ``?after=`` is refused (HTTP 403): all look alike, so a
refusal reveals nothing.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import parse_qs

from channels.generic.websocket import AsyncJsonWebsocketConsumer

from . import live
from .actors import Actor
from .api.actors import get_resolver
from .sse import parse_after


class _ScopeRequest:
    """What a resolver reads from a request (``headers``, ``user``), taken from an ASGI scope."""

    def __init__(self, scope: dict[str, Any]) -> None:
        self.headers = {
            k.decode("latin-1").title(): v.decode("latin-1") for k, v in scope["headers"]
        }
        self.user = scope.get("user")


def _resolve(scope: dict[str, Any]) -> Actor | None:
    return get_resolver().resolve(_ScopeRequest(scope))


class RunStreamConsumer(AsyncJsonWebsocketConsumer):
    """Streams one run's frames to one WebSocket client, from ``?after=n`` on."""

    _task: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        actor = await live.read(_resolve, self.scope)
        run_id = self.scope["url_route"]["kwargs"]["run_id"]
        run = None if actor is None else await live.read(live.find_visible_run, actor, run_id)
        query = parse_qs(self.scope.get("query_string", b"").decode())
        after = parse_after(query.get("after", [None])[0], None)
        if run is None or after is None:
            await self.close()  # before accept: the handshake is refused
            return
        await self.accept()
        self._task = asyncio.create_task(self._send_frames(live.follow(run, after)))

    async def _send_frames(self, events: Any) -> None:
        async for event in events:
            if event.kind == "frame":
                await self.send_json({"id": event.seq, "data": event.data})
            elif event.kind != "keepalive":
                await self.send_json({"event": event.kind, "data": event.data})
        await self.close()

    async def disconnect(self, code: int) -> None:
        if self._task is not None:
            self._task.cancel()
