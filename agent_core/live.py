"""Following a run's stream live, from any process: the one reader behind SSE and WebSocket.

Order matters so that nothing falls between the table and the live feed: subscribe to the run's
live feed first (``fanout``: one per run per process, shared by its local followers), then read
the table after the client's last id, then take live frames, dropping the ones already sent (by
``seq``) and reading the table again whenever a gap shows up or a keep-alive interval passes
quietly (live delivery is best effort; the table is the truth).

An open stream holds no database connection while it waits (SPEC §15): every read runs through
``read``, on a few threads of its own, so however many streams a process serves, at most
``READER_THREADS`` connections read for them. A reader keeps its connection while other reads are
in flight (a thousand streams attaching at once do not open a thousand connections one after
another) and closes it when it was the last.
"""

from __future__ import annotations

import asyncio
import json
import select
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Literal, ParamSpec, TypeVar, cast

from asgiref.sync import sync_to_async
from django.db import connections

from . import fanout, frames, rows, sql
from .choices import RUN_TERMINAL, RunStatus
from .conf import agent_settings
from .models import Run

GENERIC_FAILURE = "The run failed."

EventKind = Literal["meta", "frame", "done", "error", "keepalive"]

READER_THREADS = 4
_readers = ThreadPoolExecutor(max_workers=READER_THREADS, thread_name_prefix="airlock-stream-read")
# Reads queued or running, counted on the event loop's thread (one loop per process serves them).
_in_flight = 0

P = ParamSpec("P")
T = TypeVar("T")
# Writes events to the client now, without waiting; False when it cannot (the write must wait).
WriteNow = Callable[[list["Event"]], bool]


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
    """Run ``fn`` (a short read) on a stream-reader thread, which then closes its connection
    unless more reads are waiting (or the connection broke)."""

    def run() -> T:
        _drop_unusable()
        try:
            return fn(*args, **kwargs)
        finally:
            for connection in connections.all(initialized_only=True):
                if _in_flight <= 1 or connection.errors_occurred or connection.in_atomic_block:
                    connection.close()

    global _in_flight
    _in_flight += 1
    try:
        return await sync_to_async(run, thread_sensitive=False, executor=_readers)()
    finally:
        _in_flight -= 1


def _drop_unusable() -> None:
    """Close a connection this reader kept from an earlier read if the server closed it
    (PostgreSQL restarted, an idle timeout, ``pg_terminate_backend``), so this read opens a
    fresh one.

    A kept connection is idle between reads: nothing comes from the server unless it is closing
    the connection (its error message, then the end of the stream), so a socket with something
    to read marks a connection to drop. One ``poll`` in place of the ``SELECT 1`` of Django's
    ``CONN_HEALTH_CHECKS`` (``is_usable``): that was a round trip before every read, the most of
    a thousand streams attaching at once after their one statement each. A reader keeps its
    connection by its own rule (reads in flight), which neither ``CONN_MAX_AGE`` nor the request
    signals see.
    """
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None and _has_input(connection.connection.fileno()):
            connection.close()


def _has_input(fd: int) -> bool:
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLPRI)
    return bool(poller.poll(0))


@dataclass
class _Shared:
    started: bool = False  # set on the reader thread before the read's first statement
    task: asyncio.Future[Any] | None = None


# Reads of the run's table waiting for a reader thread, per event loop, by (function, args).
_waiting: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[Any, ...], _Shared]] = (
    weakref.WeakKeyDictionary()
)


async def _read_shared(fn: Callable[..., T], *args: Any) -> T:
    """``read(fn, *args)``, shared by the followers asking the same until a thread starts it: a
    thousand followers of a run attaching, or told the run is quiet, at once make a few reads,
    not a thousand. A read that has started is not joined: it may have missed a frame committed
    before the caller subscribed, and the caller's live feed would not have it either."""
    loop = asyncio.get_running_loop()
    waiting = _waiting.setdefault(loop, {})
    key = (fn, *args)
    shared = waiting.get(key)
    if shared is None or shared.started:
        shared = waiting[key] = _Shared()

        def run() -> T:
            shared.started = True
            return fn(*args)

        def forget(_: asyncio.Future[Any]) -> None:
            if waiting.get(key) is shared:
                del waiting[key]

        shared.task = asyncio.ensure_future(read(run))
        shared.task.add_done_callback(forget)
    assert shared.task is not None
    # Shielded: one follower leaving does not cancel the read the others wait for.
    return cast(T, await asyncio.shield(shared.task))


def _catch_up(run_id: str, after: int) -> tuple[Event | None, list[tuple[Event, bool]]]:
    """The closing event if the run has ended, and its frames after ``after`` as Events, each
    with whether it ends the stream.

    One statement (``sql.CATCH_UP``), so one snapshot: a run read as ended comes with
    every frame (its ``finish`` frame commits with its end). Read as two, the end had to be read
    first, and a finish frame among the frames then needed a third read for the end. The Events
    are shared by the followers that share the read (``_read_shared``), and so is their encoding,
    as a live frame's is (``_shared``).
    """
    read = rows.fetch_named(sql.CATCH_UP, {"run_id": run_id, "after": after})
    if not read:  # its thread was deleted while we followed it
        return Event("error", {"code": "not_found", "message": "The run was deleted."}), []
    run, *frame_rows = read
    status = run["status"]
    ending = (
        _closing(status, run["error_code"], run["error_message"])
        if status in RUN_TERMINAL
        else None
    )
    found = []
    for row in frame_rows:
        kind = row["kind"]
        data = json.loads(row["data"])  # Django reads jsonb as text (``JSONField`` decodes it)
        if row["superseded"]:
            # Text of a model attempt a crash cut short is replayed as it was streamed live, so
            # ids stay the same on every attach, flagged (a field added, never a kind changed).
            data["superseded"] = True
        event = Event("frame", {"kind": kind, **data}, row["seq"])
        found.append((event, frames.ends_stream(kind, data)))
    return ending, found


def _closing(status: str, code: str, message: str) -> Event:
    if status != RunStatus.FAILED:
        return Event("done", {"status": status})
    shown = message if agent_settings().expose_error_details and message else GENERIC_FAILURE
    return Event("error", {"code": code or "run_failed", "message": shown})


async def follow(run: Run, after: int) -> AsyncIterator[Event]:
    """``meta``, the frames after ``after``, then live frames until ``done`` / ``error``."""
    async with aclosing(batches(run, after)) as events:
        async for batch in events:
            for event in batch:
                yield event


async def batches(
    run: Run, after: int, write_now: WriteNow | None = None
) -> AsyncGenerator[list[Event], None]:
    """``follow``'s events, in lists of what was ready at once: a follower that lagged sends the
    frames that queued up for it in one write.

    ``write_now(events)``: writes events to the client at once if it can (True); given one, a
    follower that is waiting for live frames, caught up, has the next ones written by the feed
    (``_Live``), and they are not yielded.
    """
    async with fanout.subscribe(run.pk, agent_settings().STREAM_KEEPALIVE_SECONDS) as feed:
        yield [Event("meta", {"run_id": run.pk, "thread_id": run.thread_id})]
        last, read_table, batch = after, True, []
        direct = _Live(write_now) if write_now is not None else None
        while True:
            if read_table:
                read_table = False
                ending, caught_up = await _read_shared(_catch_up, run.pk, last)
                for event, ends in caught_up:
                    last = cast(int, event.seq)
                    batch.append(event)
                    if ends:
                        assert ending is not None, "a finish frame commits with the run's end"
                        yield [*batch, ending]
                        return
                if ending is not None:  # the client resumed after the finish frame
                    yield [*batch, ending]
                    return
            if batch:
                yield batch
                batch = []
            if direct is None:
                messages = await feed.take()
            else:
                direct.last = last
                messages = await feed.take(direct.direct)
                last = direct.last
            for message in messages:
                if message is fanout.QUIET:
                    batch.append(Event("keepalive"))
                if message is fanout.QUIET or message is fanout.LOST:
                    read_table = True
                    continue
                fresh, gap = _following(message, last)
                read_table = read_table or gap  # the table has what the live feed lost
                for event, ends in fresh:
                    last = cast(int, event.seq)
                    batch.append(event)
                    if ends:
                        yield [*batch, await _final(run.pk, last)]
                        return


class _Live:
    """The direct delivery of ``batches``'s follower while it waits (``fanout.Inbox.take``): the
    frames that follow ``last`` without a gap and do not end the stream, written by
    ``write_now``; anything else (a gap, the end, a keep-alive, a lost feed) is left to the
    follower."""

    def __init__(self, write_now: WriteNow) -> None:
        self.write_now = write_now
        self.last = 0

    def direct(self, message: dict[str, Any]) -> bool:
        if message is fanout.QUIET or message is fanout.LOST:
            return False
        fresh, gap = _following(message, self.last)
        if not fresh:
            return not gap
        if gap or any(ends for _, ends in fresh):
            return False
        if not self.write_now([event for event, _ in fresh]):
            return False
        self.last = cast(int, fresh[-1][0].seq)
        return True


def _following(message: dict[str, Any], last: int) -> tuple[list[tuple[Event, bool]], bool]:
    """The live message's frames that follow frame ``last`` without a gap (each with whether it
    ends the stream), and whether a gap cut them short."""
    fresh: list[tuple[Event, bool]] = []
    for event, ends in _shared(message):
        seq = cast(int, event.seq)
        if seq <= last:
            continue  # already sent from the table
        if seq != last + 1:
            return fresh, True
        last = seq
        fresh.append((event, ends))
    return fresh, False


def _shared(message: dict[str, Any]) -> list[tuple[Event, bool]]:
    """The live message's frames in ``seq`` order, as Events, each with whether it ends the
    stream: made by the first local follower that reads the message (it is one dict for all of
    them: ``fanout``), so a thousand followers sort, build and encode a frame once."""
    shared = message.get("events")
    if shared is None:
        ordered = sorted(message.get("frames", []), key=lambda f: f["seq"])
        shared = message["events"] = [
            (
                Event("frame", {"kind": f["kind"], **f["data"]}, f["seq"]),
                frames.ends_stream(f["kind"], f["data"]),
            )
            for f in ordered
        ]
    return cast(list[tuple[Event, bool]], shared)


async def _final(run_id: str, last: int) -> Event:
    """The run's end, once a live frame ended its stream (``last``: that frame's seq)."""
    ending, _ = await _read_shared(_catch_up, run_id, last)
    assert ending is not None, "a finish frame commits with the run's end"
    return ending
