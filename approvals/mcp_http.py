"""``/agent/mcp``: the approvals MCP server (``approvals.mcp_server``) over streamable HTTP, for
an approver's MCP client, authenticated by a token: ``Authorization: Token <key>`` (DRF's token,
as the REST API; ``Bearer`` is accepted too, as MCP clients send it). No token, or a bad one: 401.

It is an ASGI endpoint, routed by ``with_airlock`` (``agent_core.asgi.asgi_view``); the SDK
serves each request on its own (stateless, JSON answers), as the approver it authenticated.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from rest_framework.authtoken.models import Token

from agent_core.actors import Actor, actor_for_user

from .mcp_server import build

_ACTOR = "airlock_actor"  # where the scope carries the authenticated approver


def _actor_of(ctx: Context) -> Actor:
    actor: Actor = ctx.request_context.request.scope[_ACTOR]  # type: ignore[union-attr]
    return actor


def _authenticated(authorization: str) -> Actor | None:
    scheme, _, key = authorization.partition(" ")
    if scheme.lower() not in ("token", "bearer") or not key.strip():
        return None
    close_old_connections()
    try:
        token = Token.objects.select_related("user").filter(key=key.strip()).first()
        if token is None or not token.user.is_active:
            return None
        return actor_for_user(token.user)
    finally:
        close_old_connections()


class McpEndpoint:
    """The ASGI application of ``/agent/mcp``."""

    def __init__(self) -> None:
        self._server: MCPServer | None = None
        self._running: asyncio.Task[None] | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = dict(scope.get("headers", []))
        authorization = headers.get(b"authorization", b"").decode("latin-1")
        actor = await sync_to_async(_authenticated)(authorization)
        if actor is None:
            await _refuse(send)
            return
        server = await self._started()
        await server.session_manager.handle_request({**scope, _ACTOR: actor}, receive, send)

    async def _started(self) -> MCPServer:
        if self._server is None:
            server = build(_actor_of)
            # Its Starlette app is not used (Django routes here), but making it makes the
            # session manager; the token, not the Host header, guards this endpoint.
            server.streamable_http_app(
                stateless_http=True,
                json_response=True,
                transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            )
            ready = asyncio.Event()
            self._running = asyncio.create_task(_run(server, ready))
            await ready.wait()
            self._server = server
        return self._server


async def _run(server: MCPServer, ready: asyncio.Event) -> None:
    async with server.session_manager.run():
        ready.set()
        await asyncio.Event().wait()  # as long as the process serves


async def _refuse(send: Any) -> None:
    body = json.dumps(
        {"code": "not_authenticated", "detail": "Send Authorization: Token <your API token>."}
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"www-authenticate", b'Token realm="airlock"'),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


endpoint = McpEndpoint()
