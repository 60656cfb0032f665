"""Replay from the table (superseded text flagged, the run's end read with the frames), the table
reads followers share, and the reader threads' kept connections."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from contextlib import aclosing
from typing import Any, TypeVar

import psycopg
import pytest
from django.db import connection, connections

from agent_core.choices import RunStatus
from agent_core.engine import access, rows, sql
from agent_core.models import Run, StreamFrame
from agent_core.streams import live
from tests.conftest import ALICE

pytestmark = pytest.mark.django_db

T = TypeVar("T")


def test_superseded_text_is_replayed_with_its_id_and_flagged(turn):
    run = turn("hello there")
    text = StreamFrame.objects.filter(run=run, kind="text").first()
    assert text is not None
    StreamFrame.objects.filter(pk=text.pk).update(superseded=True)
    ending, frames = live._catch_up(run.pk, 0)
    assert ending == live.Event("done", {"status": "completed"})
    assert [event.seq for event, _ in frames] == list(range(1, len(frames) + 1))
    flagged = {event.seq: event.data.get("superseded", False) for event, _ in frames}
    assert flagged[text.seq] is True
    assert sum(flagged.values()) == 1


def test_a_failed_run_with_many_frames_catches_up_with_its_error_read_once(turn, settings):
    settings.AGENT = {**settings.AGENT, "EXPOSE_ERROR_DETAILS": True}
    run = turn("hello there")
    message = "the model provider said no " * 40  # ~1 KB, as a traceback-sized message is
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.FAILED, error_code="model_error", error_message=message
    )
    last = StreamFrame.objects.filter(run=run).count()
    StreamFrame.objects.bulk_create(
        StreamFrame(run=run, seq=last + n, kind="data-note", data={"n": n}) for n in range(1, 301)
    )
    read = rows.fetch_rows(sql.CATCH_UP, {"run_id": run.pk, "after": 0})
    # The run's columns once (its row first), not repeated on each of the frames' rows.
    assert [row["error_message"] for row in read].count(message) == 1
    assert read[0]["error_message"] == message
    assert [row["seq"] for row in read[1:]] == list(range(1, last + 301))
    ending, frames = live._catch_up(run.pk, 0)
    assert ending == live.Event("error", {"code": "model_error", "message": message})
    assert [event.seq for event, _ in frames] == list(range(1, last + 301))
    ending, frames = live._catch_up(run.pk, last + 300)  # resumed after the last frame
    assert ending == live.Event("error", {"code": "model_error", "message": message})
    assert frames == []


async def _waiting_reads_are_shared() -> None:
    gate, calls = threading.Event(), []

    def slow(key: str) -> str:
        calls.append(key)
        return key

    # Every reader thread busy: the reads below wait in the queue, and are asked for 50 times.
    busy = [asyncio.ensure_future(live.read(gate.wait, 10)) for _ in range(live.READER_THREADS)]
    asked = [asyncio.ensure_future(live._read_shared(slow, "a")) for _ in range(50)]
    await asyncio.sleep(0.1)
    assert calls == []
    gate.set()
    assert await asyncio.gather(*asked) == ["a"] * 50
    assert calls == ["a"]
    await asyncio.gather(*busy)


async def _a_started_read_is_not_joined() -> None:
    started, release, calls = threading.Event(), threading.Event(), []

    def held(key: str) -> str:
        started.set()
        release.wait(10)
        calls.append(key)
        return key

    first = asyncio.ensure_future(live._read_shared(held, "b"))
    await asyncio.to_thread(started.wait, 10)
    second = asyncio.ensure_future(live._read_shared(held, "b"))  # may miss nothing: a new read
    await asyncio.sleep(0.1)
    release.set()
    assert await asyncio.gather(first, second) == ["b", "b"]
    assert calls == ["b", "b"]


def test_followers_asking_the_same_read_while_it_waits_share_it() -> None:
    asyncio.run(_waiting_reads_are_shared())


def test_a_read_that_has_started_is_not_shared_with_later_followers() -> None:
    asyncio.run(_a_started_read_is_not_joined())


async def _on_every_reader(fn: Callable[[], T]) -> list[T]:
    """``fn`` once on each reader thread (a barrier holds each thread until all have one)."""
    barrier = threading.Barrier(live.READER_THREADS)

    def each() -> T:
        barrier.wait(10)
        return fn()

    return await asyncio.gather(*(live.read(each) for _ in range(live.READER_THREADS)))


def _backend_pid() -> int:
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


@pytest.mark.django_db(transaction=True)
def test_a_kept_connection_the_server_closed_does_not_fail_the_next_attach(turn, monkeypatch):
    run = turn("hello there")
    # Reads in flight all along: every reader thread keeps its connection after its read.
    monkeypatch.setattr(live, "_in_flight", 100)
    kept = asyncio.run(_on_every_reader(_backend_pid))
    with connection.cursor() as cursor:  # PostgreSQL restarted, or an idle timeout
        # ... and has closed them by the next attach: the call waits for the backends to exit.
        cursor.execute(
            "SELECT pg_terminate_backend(pid, 10000) FROM unnest(%s::int[]) AS pid", [kept]
        )
    try:
        found = asyncio.run(live.read(access.visible_run, ALICE, run.pk))
        assert found is not None and found.pk == run.pk
    finally:
        monkeypatch.setattr(live, "_in_flight", 0)
        asyncio.run(_on_every_reader(connections.close_all))


def _statements_on_readers(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The statements the reader threads send from now on, as psycopg sends them (Django's
    health check goes to psycopg directly, under any of Django's own wrappers)."""
    sent: list[str] = []
    execute = psycopg.Cursor.execute

    def counted(cursor: psycopg.Cursor[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
        if threading.current_thread().name.startswith("airlock-stream-read"):
            sent.append(str(query))
        return execute(cursor, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", counted)
    return sent


@pytest.mark.django_db(transaction=True)
def test_an_attach_on_a_kept_connection_sends_its_one_statement(turn, monkeypatch):
    run = turn("hello there")
    monkeypatch.setattr(live, "_in_flight", 100)  # every reader keeps its connection
    try:
        asyncio.run(_on_every_reader(lambda: access.visible_run(ALICE, run.pk)))
        sent = _statements_on_readers(monkeypatch)
        found = asyncio.run(live.read(access.visible_run, ALICE, run.pk))
        assert found is not None and found.pk == run.pk
        assert len(sent) == 1, sent  # no health check's round trip before it
    finally:
        monkeypatch.setattr(live, "_in_flight", 0)
        asyncio.run(_on_every_reader(connections.close_all))


async def _first_batches(run: Run, count: int) -> list[list[live.Event]]:
    found = []
    async with aclosing(live.batches(run, 0)) as batches:
        async for batch in batches:
            found.append(batch)
            if len(found) == count:
                break
    return found


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("ended", [True, False])
def test_a_stream_catching_up_reads_the_run_and_its_frames_in_one_statement(
    turn, monkeypatch, ended
):
    run = turn("hello there")
    if not ended:  # still running: its frames so far, then it waits for live ones
        StreamFrame.objects.filter(run=run, kind="finish").delete()
        Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)
    stored = StreamFrame.objects.filter(run=run).count()
    monkeypatch.setattr(live, "_in_flight", 100)  # every reader keeps its connection
    try:
        asyncio.run(_on_every_reader(lambda: access.visible_run(ALICE, run.pk)))
        sent = _statements_on_readers(monkeypatch)
        meta, caught_up = asyncio.run(_first_batches(run, 2))
        assert [e.kind for e in meta] == ["meta"]
        assert [e.seq for e in caught_up if e.kind == "frame"] == list(range(1, stored + 1))
        assert caught_up[-1].kind == ("done" if ended else "frame")
        assert len(sent) == 1, sent  # the run's end and its frames in one read
    finally:
        monkeypatch.setattr(live, "_in_flight", 0)
        asyncio.run(_on_every_reader(connections.close_all))


async def _caught_up_together(run: Run) -> tuple[list[live.Event], list[live.Event]]:
    gate = threading.Event()
    busy = [asyncio.ensure_future(live.read(gate.wait, 10)) for _ in range(live.READER_THREADS)]
    followers = [live.batches(run, 0) for _ in range(2)]
    try:
        for follower in followers:
            assert [event.kind for event in await anext(follower)] == ["meta"]
        # Both ask for the run's frames while every reader thread is busy: one shared read (each
        # runs to its read without suspending before it).
        asked = [asyncio.ensure_future(anext(follower)) for follower in followers]
        await asyncio.sleep(0)
        gate.set()
        first, second = await asyncio.gather(*asked)
    finally:
        gate.set()
        for follower in followers:
            await follower.aclose()
        await asyncio.gather(*busy)
    return first, second


@pytest.mark.django_db(transaction=True)
def test_followers_attaching_together_share_the_events_they_catch_up_on(turn):
    run = turn("hello there")
    first, second = asyncio.run(_caught_up_together(run))
    assert [event.kind for event in first][-1] == "done"
    assert len(first) == StreamFrame.objects.filter(run=run).count() + 1
    # The same objects: a frame replayed to a thousand followers is encoded once (``Event.encoded``)
    assert all(a is b for a, b in zip(first, second, strict=True))


def _allow_connections(allowed: bool) -> None:
    """Let sessions into the test database, or refuse them as a server that is restarting does
    (existing sessions stay; the statement runs from the maintenance database)."""
    settings = connection.settings_dict
    name = settings["NAME"]
    with psycopg.connect(
        host=settings["HOST"],
        port=settings["PORT"],
        user=settings["USER"],
        dbname="postgres",
        autocommit=True,
    ) as maintenance:
        maintenance.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS {str(allowed).lower()}')


async def _followed_through_an_outage(run: Run) -> tuple[bool, list[live.Event]]:
    """The run followed while its table cannot be read for a while: whether the stream was still
    open when the database came back, and the events after ``meta``."""
    got: list[live.Event] = []
    async with aclosing(live.batches(run, 0)) as batches:
        assert [event.kind for event in await anext(batches)] == ["meta"]
        await asyncio.to_thread(_allow_connections, False)
        try:
            following = asyncio.ensure_future(anext(batches))
            await asyncio.sleep(2 * live._REREAD_SECONDS)  # reads that find the database away
            open_through = not following.done()
        finally:
            await asyncio.to_thread(_allow_connections, True)
        got += await following
        async for batch in batches:
            got += batch
    return open_through, got


@pytest.mark.django_db(transaction=True)
def test_a_stream_stays_open_while_the_database_is_away_and_ends_when_it_is_back(turn):
    run = turn("hello there")
    open_through, got = asyncio.run(_followed_through_an_outage(run))
    assert open_through  # not ended by the error of a read: it ended no stream with its end
    stored = list(StreamFrame.objects.filter(run=run).order_by("seq").values_list("seq", flat=True))
    assert [event.seq for event in got if event.kind == "frame"] == stored
    assert got[-1] == live.Event("done", {"status": "completed"})
