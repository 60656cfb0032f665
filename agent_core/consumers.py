"""``/agent/chat/<run_id>/ws``: the same frames as the SSE stream, over a WebSocket (read-only).

Messages: ``{"event": "meta", "data": …}``, ``{"id": n, "data": {"kind": …}}``, then
``{"event": "done", "data": …}`` or ``{"event": "error", "data": {"code", "message"}}``; the
server closes after the last. Close codes: 4401 no actor, 4404 unknown run, 4400 bad ``after``.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import parse_qs

from asgiref.sync import sync_to_async
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
        await self.accept()
        actor = await sync_to_async(_resolve)(self.scope)
        if actor is None:
            await self.close(code=4401)
            return
        run_id = self.scope["url_route"]["kwargs"]["run_id"]
        run = await sync_to_async(live.find_visible_run)(actor, run_id)
        if run is None:
            await self.close(code=4404)
            return
        query = parse_qs(self.scope.get("query_string", b"").decode())
        after = parse_after(query.get("after", [None])[0], None)
        if after is None:
            await self.close(code=4400)
            return
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
