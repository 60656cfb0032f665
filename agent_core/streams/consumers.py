"""``/agent/chat/<run_id>/ws``: the same frames as the SSE stream, over a WebSocket (read-only).

Messages: ``{"event": "meta", "data": …}``, ``{"id": n, "data": {"kind": …}}``, then
``{"event": "done", "data": …}`` or ``{"event": "error", "data": {"code", "message"}}``; the
server closes after the last. The handshake is authenticated as the REST API is (the session,
``Authorization: Token <key>``, or the token offered as a subprotocol), then the actor resolver
runs. A handshake without an actor, with a bad token, for a run the actor may not see (or that
does not exist), or with a bad ``?after=`` is refused (HTTP 403): all look alike, so a refusal
reveals nothing. An actor at its cap of streams (``AGENT["MAX_STREAMS_PER_ACTOR"]``) is accepted
and closed at once with code 4429 (``too_many_streams``).
"""

from __future__ import annotations

import asyncio
import io
from typing import Any
from urllib.parse import parse_qs

from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.contrib.auth.models import AnonymousUser
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest
from rest_framework.exceptions import APIException

from ..actors import Actor
from ..engine import access
from ..exceptions import TooManyStreams
from . import live, stream_slots
from .sse import parse_after, resolve_actor

# Browsers cannot set headers on a WebSocket: they offer the token as a subprotocol instead,
# ``new WebSocket(url, ["airlock", "airlock.token." + key])``, and the server picks ``airlock``.
PROTOCOL = "airlock"
TOKEN_PROTOCOL = "airlock.token."
TOO_MANY_STREAMS = 4429  # the close code of a stream past the actor's cap (HTTP's 429)


def _http_request(scope: dict[str, Any]) -> HttpRequest:
    """The handshake as a Django request, for the REST API's authentication classes."""
    request = ASGIRequest({**scope, "method": "GET"}, io.BytesIO())
    offered = [p for p in scope.get("subprotocols", []) if p.startswith(TOKEN_PROTOCOL)]
    if offered and "HTTP_AUTHORIZATION" not in request.META:
        request.META["HTTP_AUTHORIZATION"] = f"Token {offered[0].removeprefix(TOKEN_PROTOCOL)}"
    request.user = scope.get("user") or AnonymousUser()  # the session, from AuthMiddlewareStack
    return request


def _resolve(scope: dict[str, Any]) -> Actor | None:
    try:
        return resolve_actor(_http_request(scope))
    except APIException:  # no actor, or a bad token
        return None


class RunStreamConsumer(AsyncJsonWebsocketConsumer):
    """Streams one run's frames to one WebSocket client, from ``?after=n`` on."""

    _task: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        actor = await live.read(_resolve, self.scope)
        run_id = self.scope["url_route"]["kwargs"]["run_id"]
        run = None if actor is None else await live.read(access.visible_run, actor, run_id)
        query = parse_qs(self.scope.get("query_string", b"").decode())
        after = parse_after(query.get("after", [None])[0], None)
        if run is None or after is None:
            await self.close()  # before accept: the handshake is refused
            return
        assert actor is not None
        try:
            stream_slots.hold(actor, run)  # while this consumer follows ``run`` (sse.attach_as)
        except TooManyStreams:
            # Accepted to be closed with a code that says why (a refused handshake says nothing).
            await self.accept()
            await self.close(code=TOO_MANY_STREAMS)
            return
        await self.accept(PROTOCOL if PROTOCOL in self.scope.get("subprotocols", []) else None)
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
