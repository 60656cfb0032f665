"""Following a run's stream live, from any process: the one reader behind SSE and WebSocket.

Order matters so that nothing falls between the table and the live feed: subscribe to the run's
live feed first (``fanout``: one per run per process, shared by its local followers), then read
the table after the client's last id, then take live frames, dropping the ones already sent (by
``seq``) and reading the table again whenever a gap shows up or a keep-alive interval passes
quietly (live delivery is best effort; the table is the truth).

An open stream holds no database connection while it waits (SPEC §15): every read runs through
``read``, on a few threads of its own, and closes its connection when done, so however many
streams a process serves, at most ``READER_THREADS`` connections read for them at any moment.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal, ParamSpec, TypeVar, cast

from asgiref.sync import sync_to_async
from django.db import connections

from . import fanout, frames
from .access import visible_runs
from .actors import Actor
from .conf import agent_settings
from .models import Run, RunStatus, StreamFrame

GENERIC_FAILURE = "The run failed."

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
    # A live frame's Event is shared by every local follower of the run (``_shared``): a format
    # keeps its encoding here, so the frame is encoded once per process, not once per follower.
    encoded: dict[str, bytes] = field(default_factory=dict, compare=False, repr=False)


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
    keepalive = agent_settings().STREAM_KEEPALIVE_SECONDS
    async with fanout.subscribe(run.pk) as feed:
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
                # asyncio.timeout, not wait_for: no task per message (a thousand followers).
                async with asyncio.timeout(keepalive):
                    message = await feed.get()
            except TimeoutError:
                yield Event("keepalive")
                read_table = True
                continue
            if message is fanout.LOST:
                read_table = True
                continue
            for frame in sorted(message.get("frames", []), key=lambda f: f["seq"]):
                if frame["seq"] <= last:
                    continue  # already sent from the table
                if frame["seq"] != last + 1:
                    read_table = True  # a gap: the table has what the live feed lost
                    break
                last = frame["seq"]
                yield _shared(frame)
                if frames.ends_stream(frame["kind"], frame["data"]):
                    yield await _final(run.pk)
                    return


def _shared(frame: dict[str, Any]) -> Event:
    """The frame's Event, made by the first local follower that sends it (the live message is
    one dict for all of them: ``fanout``)."""
    event = frame.get("event")
    if event is None:
        event = frame["event"] = Event(
            "frame", {"kind": frame["kind"], **frame["data"]}, frame["seq"]
        )
    return cast(Event, event)


async def _final(run_id: str) -> Event:
    ending = await read(_ending, run_id)
    assert ending is not None, "a finish frame commits with the run's end"
    return ending
