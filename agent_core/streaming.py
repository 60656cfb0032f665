"""The SSE stream view served leanly by ``with_airlock``: one thread hop to attach, and each
block of events written with the server's ``send``.

Under Django's ASGI handler, every one of the project's middleware classes runs each request in
a hop to the one thread that sync code shares (about twenty hops per request with the default
middleware), and each block of events passes through the response's async iterators. A thousand
streams attaching at once queued for tens of seconds behind that one thread. Here a view marked
``sse.lean`` runs through the same Django code (the project's middleware, the URL resolver, the
view) synchronously, in one call on a stream-reader thread (``live.read``); an ``EventStream``
it answers is then written here, block by block, and any other answer (405, 401, 404, 400) is
sent by Django's own ``send_response``.

The request signals (``request_started`` / ``request_finished``) are not sent for these streams:
their receivers close the calling thread's database connections, and the reader threads manage
theirs (``live.read``).
"""

from __future__ import annotations

import asyncio
import io
from contextlib import aclosing
from typing import Any

from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.base import BaseHandler
from django.http import HttpResponseBase

from . import live
from .sse import EventStream, block


class StreamHandler(ASGIHandler):
    """Django's request handling with the project's middleware loaded for synchronous calls."""

    def __init__(self) -> None:
        BaseHandler.__init__(self)  # not ASGIHandler's: that loads the middleware for async
        self.load_middleware()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        request, refused = self.create_request(scope, io.BytesIO())  # a GET has no body
        if request is None:
            assert refused is not None  # Django's 400 / 413
            await self.send_response(refused, send)
            return
        response = await live.read(self.get_response, request)
        if isinstance(response, EventStream):
            await _serve(response, receive, send)
        else:
            await self.send_response(response, send)


async def _serve(response: EventStream, receive: Any, send: Any) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": response.status_code,
            "headers": _headers(response),
        }
    )
    writer = asyncio.ensure_future(_write(response, send))
    listener = asyncio.ensure_future(_disconnected(receive))
    try:
        done, _ = await asyncio.wait((writer, listener), return_when=asyncio.FIRST_COMPLETED)
    finally:
        writer.cancel()
        listener.cancel()
        await asyncio.gather(writer, listener, return_exceptions=True)
    if writer in done:
        writer.result()  # the stream ended, not the client: raise what made it fail, if anything


async def _write(response: EventStream, send: Any) -> None:
    async with aclosing(response.batches) as batches:
        async for batch in batches:
            await send({"type": "http.response.body", "body": block(batch), "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _disconnected(receive: Any) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def _headers(response: HttpResponseBase) -> list[tuple[bytes, bytes]]:
    # As Django's ASGIHandler.send_response builds them (header case preserved).
    headers = [(name.encode("ascii"), value.encode("latin1")) for name, value in response.items()]
    for cookie in response.cookies.values():
        headers.append((b"Set-Cookie", cookie.output(header="").encode("ascii").strip()))
    return headers
