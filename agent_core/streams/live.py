"""Following a run's stream live, from any process: the one reader behind SSE and WebSocket.

Order matters so that nothing falls between the table and the live feed: subscribe to the run's
live feed first (``fanout``: one per run per process, shared by its local followers), then read
the table after the client's last id, then take live frames, dropping the ones already sent (by
``seq``) and reading the table again whenever a gap shows up or a keep-alive interval passes
quietly (live delivery is best effort; the table is the truth). While PostgreSQL is away (a
restart, a failover) the stream stays open and reads the table again every ``_REREAD_SECONDS``
until it is back (SPEC §20).

An open stream holds no database connection while it waits (SPEC §15): every read runs through
``read``, on a few threads of its own, so however many streams a process serves, at most
``READER_THREADS`` connections read for them. A reader keeps its connection while other reads are
in flight (a thousand streams attaching at once do not open a thousand connections one after
another) and closes it when it was the last.
"""

from __future__ import annotations

import asyncio
import json
import logging
import select
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Literal, ParamSpec, TypeVar, cast

from asgiref.sync import sync_to_async
from django.db import DatabaseError, InterfaceError, connections

from ..choices import RUN_TERMINAL, RunStatus
from ..conf import agent_settings
from ..engine import frames, outages, rows, sql
from ..models import Run
from . import fanout

GENERIC_FAILURE = "The run failed."

EventKind = Literal["meta", "frame", "done", "error", "keepalive"]

logger = logging.getLogger(__name__)

READER_THREADS = 4
# How soon a follower reads the table again after it found the database away.
_REREAD_SECONDS = 1.0
_readers = ThreadPoolExecutor(max_workers=READER_THREADS, thread_name_prefix="airlock-stream-read")
# Reads queued or running, counted on the event loop's thread (one loop per process serves them).
_in_flight = 0

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


async def _catch_up_unless_away(
    run_id: str, after: int
) -> tuple[Event | None, list[tuple[Event, bool]] | None]:
    """``_catch_up`` (shared), or no frames (``None``) while PostgreSQL is away (a restart, a
    failover): the stream stays open, and its follower reads the table again later. Raised, the
    error ended the stream without its end, and daphne, whose error page cannot follow a started
    response, left the client waiting on an open connection."""
    try:
        return await _read_shared(_catch_up, run_id, after)
    except (DatabaseError, InterfaceError) as exc:
        if not outages.database_lost(exc):
            raise
        logger.info("cannot read the stream of %s, the database is away: %s", run_id, exc)
        return None, None


def _catch_up(run_id: str, after: int) -> tuple[Event | None, list[tuple[Event, bool]]]:
    """The closing event if the run has ended, and its frames after ``after`` as Events, each
    with whether it ends the stream.

    One statement (``sql.CATCH_UP``), so one snapshot: a run read as ended comes with
    every frame (its ``finish`` frame commits with its end). Read as two, the end had to be read
    first, and a finish frame among the frames then needed a third read for the end. The Events
    are shared by the followers that share the read (``_read_shared``), and so is their encoding,
    as a live frame's is (``_shared``).
    """
    read = rows.fetch_rows(sql.CATCH_UP, {"run_id": run_id, "after": after})
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


async def batches(run: Run, after: int) -> AsyncGenerator[list[Event], None]:
    """``follow``'s events, in lists of what was ready at once: a follower that lagged sends the
    frames that queued up for it in one write."""
    async with fanout.subscribe(run.pk, agent_settings().STREAM_KEEPALIVE_SECONDS) as feed:
        yield [Event("meta", {"run_id": run.pk, "thread_id": run.thread_id})]
        last, read_table, batch = after, True, []
        while True:
            if read_table:
                ending, caught_up = await _catch_up_unless_away(run.pk, last)
                read_table = caught_up is None
                for event, ends in caught_up or ():
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
            try:
                # The table could not be read: read it again after a while, or sooner if the
                # feed has a message (keep-alives go on meanwhile).
                messages = await asyncio.wait_for(
                    feed.take(), _REREAD_SECONDS if read_table else None
                )
            except TimeoutError:
                messages = []
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
                    if ends:  # the run's end: the table has it (it commits with the frame)
                        read_table = True


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
