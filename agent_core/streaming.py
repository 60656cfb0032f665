"""The SSE stream view served leanly by ``with_airlock``: one thread hop to attach, and each
block of events written with the server's ``send``.

Under Django's ASGI handler, every one of the project's middleware classes runs each request in
a hop to the one thread that sync code shares (about twenty hops per request with the default
middleware), and each block of events passes through the response's async iterators. A thousand
streams attaching at once queued for tens of seconds behind that one thread. Here a view marked
``sse.lean`` runs through the same Django code (the project's middleware, the view)
synchronously, in one call on a stream-reader thread (``live.read``), with the URL resolver's
match that the router found it by (the path is resolved once); an ``EventStream`` it answers is
then written here, block by block, and any other answer (405, 401, 404, 400) is sent by Django's
own ``send_response``.

The request signals (``request_started`` / ``request_finished``) are not sent for these streams:
their receivers close the calling thread's database connections, and the reader threads manage
theirs (``live.read``).
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Generator
from contextlib import aclosing
from typing import Any

from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.base import BaseHandler
from django.http import HttpRequest, HttpResponseBase
from django.urls import ResolverMatch

from . import live
from .models import Run
from .sse import EventStream, block

# The request's attribute holding the match ``StreamHandler`` was handed.
_RESOLVED = "_airlock_resolved"


class StreamHandler(ASGIHandler):
    """Django's request handling with the project's middleware loaded for synchronous calls."""

    def __init__(self) -> None:
        BaseHandler.__init__(self)  # not ASGIHandler's: that loads the middleware for async
        self.load_middleware()

    async def __call__(
        self, scope: dict[str, Any], receive: Any, send: Any, match: ResolverMatch | None = None
    ) -> None:
        """``match``: the path's, when the caller resolved it already (``with_airlock``'s router,
        to find the view lean), so it is not resolved again."""
        request, refused = self.create_request(scope, io.BytesIO())  # a GET has no body
        if request is None:
            assert refused is not None  # Django's 400 / 413
            await self.send_response(refused, send)
            return
        setattr(request, _RESOLVED, match)
        del match
        response = await live.read(self.get_response, request)
        if not isinstance(response, EventStream):
            await self.send_response(response, send)
            return
        start = {"type": "http.response.start", "status": response.status_code}
        start["headers"] = _headers(response)
        run, after = response.run, response.after
        # Not kept while the stream lasts: the request and the response (which holds it) are
        # dozens of objects a stream that every full garbage collection would walk again.
        del request, response
        await send(start)
        await _serve(run, after, receive, send)

    def resolve_request(self, request: HttpRequest) -> ResolverMatch:
        """The match the router found, unless the project's middleware gave the request a URLconf
        of its own (``request.urlconf``), which Django's resolves it by."""
        match: ResolverMatch | None = getattr(request, _RESOLVED, None)
        if match is None or hasattr(request, "urlconf"):
            return super().resolve_request(request)
        request.resolver_match = match
        return match


async def _serve(run: Run, after: int, receive: Any, send: Any) -> None:
    writer = asyncio.ensure_future(_Writer(send).write(run, after))
    listener = asyncio.ensure_future(_disconnected(receive))
    try:
        done, _ = await asyncio.wait((writer, listener), return_when=asyncio.FIRST_COMPLETED)
    finally:
        writer.cancel()
        listener.cancel()
        await asyncio.gather(writer, listener, return_exceptions=True)
    if writer in done:
        writer.result()  # the stream ended, not the client: raise what made it fail, if anything


class _Writer:
    """One stream's writes: the follower's batches, and the live frames the run's feed hands over
    while the follower waits (``now``), so that a frame to a thousand caught-up streams wakes
    none of their tasks: each is one ``send`` made from the feed's step.

    ``send`` is a coroutine function; ``now`` runs it to its first suspension. A server's send
    that suspends (its transport's buffer is full: uvicorn's flow control) is finished by a task
    of its own, which every later write of the stream waits for, so writes keep their order.
    """

    def __init__(self, send: Any) -> None:
        self.send = send
        self.pending: asyncio.Future[None] | None = None
        self.failed: BaseException | None = None

    async def write(self, run: Run, after: int) -> None:
        batches = live.batches(run, after, self.now)
        try:
            async with aclosing(batches):
                async for batch in batches:
                    await self._send(block(batch), True)
            await self._send(b"", False)
        finally:  # the client left: a write still waiting for its socket is dropped with it
            if self.pending is not None:
                self.pending.cancel()

    def now(self, events: list[live.Event]) -> bool:
        if self.failed is not None or self.pending is not None:
            return False  # the follower writes it, after the pending write (or raises)
        body = {"type": "http.response.body", "body": block(events), "more_body": True}
        sending = self.send(body)
        try:
            waiting = sending.send(None)
        except StopIteration:
            return True
        except Exception as exc:  # raised by the follower's next write, not in the feed
            self.failed = exc
            return False
        self.pending = asyncio.ensure_future(_Rest(sending, waiting))
        self.pending.add_done_callback(self._written)
        return True

    def _written(self, pending: asyncio.Future[None]) -> None:
        # A write that failed stays pending: the follower's next write awaits it and raises.
        if not pending.cancelled() and pending.exception() is None:
            self.pending = None

    async def _send(self, body: bytes, more: bool) -> None:
        if self.failed is not None:
            raise self.failed
        if self.pending is not None:
            await self.pending
        await self.send({"type": "http.response.body", "body": body, "more_body": more})


class _Rest:
    """The rest of a coroutine that suspended on ``waiting`` (run to there by ``_Writer.now``),
    awaitable: it hands ``waiting`` to the awaiting task, then drives the coroutine on."""

    def __init__(self, coroutine: Any, waiting: Any) -> None:
        self.coroutine, self.waiting = coroutine, waiting

    def __await__(self) -> Generator[Any, Any, None]:
        waiting = self.waiting
        while True:
            try:
                sent = yield waiting
            except BaseException as exc:  # cancelled: into the coroutine, as an await would
                try:
                    waiting = self.coroutine.throw(exc)
                except StopIteration:
                    return
                continue
            try:
                waiting = self.coroutine.send(sent)
            except StopIteration:
                return


async def _disconnected(receive: Any) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def _headers(response: HttpResponseBase) -> list[tuple[bytes, bytes]]:
    # As Django's ASGIHandler.send_response builds them (header case preserved).
    headers = [(name.encode("ascii"), value.encode("latin1")) for name, value in response.items()]
    for cookie in response.cookies.values():
        headers.append((b"Set-Cookie", cookie.output(header="").encode("ascii").strip()))
    return headers
