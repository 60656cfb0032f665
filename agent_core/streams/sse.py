"""``GET /agent/chat/<run_id>/stream``: the run's frames as server-sent events (SPEC §9).

An async view: it checks the request (405, 401, 404, 400) in one read on a stream-reader thread
(``live.read``) and answers an ``EventStream``, whose async iterator Django's ASGI handler streams
and closes when the client leaves. A waiting run's open stream holds no database connection.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

from django.http import HttpRequest, HttpResponseBase, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework.exceptions import APIException
from rest_framework.request import Request

from ..actors import Actor
from ..api.actors import request_actor
from ..api.base import authenticators
from ..api.errors import authenticate_header
from ..engine import access
from ..exceptions import TooManyStreams
from ..models import Run
from . import live, stream_slots


def resolve_actor(request: HttpRequest) -> Actor:
    """The request's actor, authenticated as the REST API's views do; raises ``APIException``."""
    # The same authentication as the DRF views (AGENT["API_AUTHENTICATION_CLASSES"]).
    return request_actor(Request(request, authenticators=authenticators()))


def parse_after(query: str | None, header: str | None) -> int | None:
    """``?after=n`` wins over ``Last-Event-ID: n``; ``None`` when the one given is not a count."""
    raw = query if query is not None else header
    if raw is None or raw == "":
        return 0
    # isdigit() alone accepts "²" and other digits int() refuses.
    if not raw.isascii() or not raw.isdigit() or len(raw) > 12:
        return None
    return int(raw)


def _error(code: str, detail: str, status: int) -> JsonResponse:
    return JsonResponse({"code": code, "detail": detail}, status=status)


async def attach(request: HttpRequest, run_id: str) -> tuple[Run, int] | JsonResponse:
    """The run to follow and the frame to follow it after, or the JSON error that says why not
    (405, 401, 404, 400): what every format of the stream checks first (one read).

    The views that call it are ``csrf_exempt``: they only read (GET), and any other method is
    this JSON 405, not a CSRF page.
    """
    return await live.read(attach_now, request, run_id)


def attach_now(request: HttpRequest, run_id: str) -> tuple[Run, int] | JsonResponse:
    """``attach``, synchronously (on a stream-reader thread)."""
    actor = authenticate_now(request)
    if not isinstance(actor, Actor):
        return actor
    return attach_as_now(request, actor, run_id)


async def authenticate(request: HttpRequest) -> Actor | JsonResponse:
    """The actor of a GET, or the JSON 405 / 401 that refuses the request."""
    return await live.read(authenticate_now, request)


def authenticate_now(request: HttpRequest) -> Actor | JsonResponse:
    """``authenticate``, synchronously."""
    if request.method != "GET":
        refused = _error("method_not_allowed", f'Method "{request.method}" not allowed.', 405)
        refused["Allow"] = "GET"
        return refused
    try:
        return resolve_actor(request)
    except APIException as exc:
        refused = _error("not_authenticated", str(exc.detail), 401)
        refused["WWW-Authenticate"] = authenticate_header(request)
        return refused


async def attach_as(
    request: HttpRequest, actor: Actor, run_id: str
) -> tuple[Run, int] | JsonResponse:
    """``attach`` once the actor is known: the 404 and the 400 (``after``)."""
    return await live.read(attach_as_now, request, actor, run_id)


def attach_as_now(
    request: HttpRequest, actor: Actor, run_id: str
) -> tuple[Run, int] | JsonResponse:
    """``attach_as``, synchronously; the stream holds one of the actor's slots
    (``stream_slots``: 429 past ``MAX_STREAMS_PER_ACTOR``)."""
    run = access.visible_run(actor, run_id)
    if run is None:
        return _error("not_found", f"no run {run_id}", 404)
    after = parse_after(request.GET.get("after"), request.headers.get("Last-Event-ID"))
    if after is None:
        return _error("invalid", "after / Last-Event-ID must be a frame number (0 or more)", 400)
    try:
        stream_slots.hold(actor, run)  # for as long as the stream follows this ``run``
    except TooManyStreams as exc:
        refused = _error(exc.code, exc.message, exc.status_code)
        refused["Retry-After"] = str(exc.retry_after)
        return refused
    return run, after


class EventStream(StreamingHttpResponse):
    """The SSE response of a run: ``live.batches(run, after)`` yields the events ready at once,
    which ``block`` encodes as one write."""

    def __init__(self, run: Run, after: int) -> None:
        super().__init__(_blocks(run, after))
        self["Content-Type"] = "text/event-stream"
        self["Cache-Control"] = "no-cache"
        self["X-Accel-Buffering"] = "no"  # nginx: do not buffer the stream


@csrf_exempt  # it only reads (GET); any other method is a JSON 405 (attach)
async def stream_view(request: HttpRequest, run_id: str) -> HttpResponseBase:
    """Replay the frames after the client's last id, then follow the run live."""
    attached = await attach(request, run_id)
    if not isinstance(attached, tuple):
        return attached
    return EventStream(*attached)


async def _blocks(run: Run, after: int) -> AsyncGenerator[bytes, None]:
    async with aclosing(live.batches(run, after)) as batches:
        async for batch in batches:
            yield block(batch)


# A comment line and no blank line after it: a blank line ends an event, and clients that keep
# the last id across events (httpx-sse, unlike browsers) hand a comment ended by one to the
# application as an empty event carrying the id of the frame before it: that frame twice.
KEEPALIVE = b": keep-alive\n"


def block(batch: list[live.Event]) -> bytes:
    """The SSE bytes of events ready at once: most often one live frame, whose bytes every
    local follower shares."""
    return format_event(batch[0]) if len(batch) == 1 else b"".join(map(format_event, batch))


def format_event(event: live.Event) -> bytes:
    """One SSE block: frames carry ``id:``; ``meta``, ``done`` and ``error`` are named events."""
    encoded = event.encoded.get("sse")
    if encoded is None:
        encoded = event.encoded["sse"] = _format(event)
    return encoded


def _format(event: live.Event) -> bytes:
    if event.kind == "keepalive":
        return KEEPALIVE
    data = _json(event.data)
    if event.kind == "frame":
        return f"id: {event.seq}\ndata: {data}\n\n".encode()
    return f"event: {event.kind}\ndata: {data}\n\n".encode()


def _json(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"), default=str)
