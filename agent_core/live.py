"""Following a run's stream live, from any process: the one reader behind SSE and WebSocket.

Order matters so that nothing falls between the table and the live feed: subscribe to the run's
group first, then read the table after the client's last id, then take live frames, dropping the
ones already sent (by ``seq``) and reading the table again whenever a gap shows up or a keep-alive
interval passes quietly (live delivery is best effort; the table is the truth).

An open stream holds no database connection while it waits (SPEC §15): every read runs through
``read``, on a few threads of its own, and closes its connection when done, so however many
streams a process serves, at most ``READER_THREADS`` connections read for them at any moment.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal, ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import connections

from . import frames, streams
from .access import visible_runs
from .actors import Actor
from .conf import agent_settings
from .models import Run, RunStatus, StreamFrame

logger = logging.getLogger(__name__)

GENERIC_FAILURE = "The run failed."
_RETRY_SECONDS = 0.2

EventKind = Literal["meta", "frame", "done", "error", "keepalive"]

READER_THREADS = 4
_readers = ThreadPoolExecutor(max_workers=READER_THREADS, thread_name_prefix="airlock-stream-read")

P = ParamSpec("P")
T = TypeVar("T")


@dataclass(frozen=True)
class Event:
    """One thing to send: ``frame`` events carry ``seq`` (the SSE ``id``)."""

    kind: EventKind
    data: dict[str, Any] = field(default_factory=dict)
    seq: int | None = None


async def read(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run ``fn`` (a short read) on a stream-reader thread, which then closes its connection."""

    def run() -> T:
        try:
            return fn(*args, **kwargs)
        finally:
            connections.close_all()

    return await sync_to_async(run, thread_sensitive=False, executor=_readers)()


def find_visible_run(actor: Actor, run_id: str) -> Run | None:
    """The run if the actor may follow it (sync; call through ``read``)."""
    return visible_runs(actor).filter(pk=run_id).first()


def _frames_after(run_id: str, after: int) -> list[tuple[int, str, dict[str, Any]]]:
    # Text of a model attempt a crash cut short is replayed as it was streamed live, so ids stay
    # the same on every attach, flagged ``superseded`` (a field added, never a kind changed).
    rows = (
        StreamFrame.objects.filter(run_id=run_id, seq__gt=after)
        .order_by("seq")
        .values_list("seq", "kind", "data", "superseded")
    )
    return [
        (seq, kind, {**data, "superseded": True} if old else data) for seq, kind, data, old in rows
    ]


def _ending(run_id: str) -> Event | None:
    """The closing event if the run has ended (its ``finish`` frame was committed)."""
    run = Run.objects.filter(pk=run_id).only("status", "error_code", "error_message").first()
    if run is None:  # its thread was deleted while we followed it
        return Event("error", {"code": "not_found", "message": "The run was deleted."})
    if not run.is_terminal:
        return None
    return _closing(run.status, run.error_code, run.error_message)


def _closing(status: str, code: str, message: str) -> Event:
    if status != RunStatus.FAILED:
        return Event("done", {"status": status})
    shown = message if agent_settings().expose_error_details and message else GENERIC_FAILURE
    return Event("error", {"code": code or "run_failed", "message": shown})


async def follow(run: Run, after: int) -> AsyncIterator[Event]:
    """``meta``, the frames after ``after``, then live frames until ``done`` / ``error``."""
    layer = get_channel_layer()
    assert layer is not None, "CHANNEL_LAYERS must be configured to follow runs live"
    group = streams.group_name(run.pk)
    channel = await layer.new_channel()
    await layer.group_add(group, channel)
    keepalive = agent_settings().STREAM_KEEPALIVE_SECONDS
    try:
        yield Event("meta", {"run_id": run.pk, "thread_id": run.thread_id})
        last, read_table = after, True
        while True:
            if read_table:
                read_table = False
                # The run's end first: once it has ended, the table holds every frame (the finish
                # frame commits with it). Read after the frames, a run ending in between would
                # close the stream without its last frames.
                ending = await read(_ending, run.pk)
                for seq, kind, data in await read(_frames_after, run.pk, last):
                    last = seq
                    yield Event("frame", {"kind": kind, **data}, seq)
                    if frames.ends_stream(kind, data):
                        yield await _final(run.pk)
                        return
                if ending is not None:  # the client resumed after the finish frame
                    yield ending
                    return
            try:
                message = await asyncio.wait_for(layer.receive(channel), keepalive)
            except TimeoutError:
                yield Event("keepalive")
                read_table = True
                continue
            except Exception:
                # Redis hiccup (e.g. a read timeout under load): the table still has every frame.
                logger.warning("live feed of %s failed; reading the table", run.pk, exc_info=True)
                await asyncio.sleep(_RETRY_SECONDS)
                read_table = True
                continue
            for frame in sorted(message.get("frames", []), key=lambda f: f["seq"]):
                if frame["seq"] <= last:
                    continue  # already sent from the table
                if frame["seq"] != last + 1:
                    read_table = True  # a gap: the table has what the live feed lost
                    break
                last = frame["seq"]
                yield Event("frame", {"kind": frame["kind"], **frame["data"]}, last)
                if frames.ends_stream(frame["kind"], frame["data"]):
                    yield await _final(run.pk)
                    return
    finally:
        await layer.group_discard(group, channel)


async def _final(run_id: str) -> Event:
    ending = await read(_ending, run_id)
    assert ending is not None, "a finish frame commits with the run's end"
    return ending
