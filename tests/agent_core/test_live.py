"""Replay from the table (superseded text flagged), and the table reads followers share."""

from __future__ import annotations

import asyncio
import threading

import pytest

from agent_core import live
from agent_core.models import StreamFrame

pytestmark = pytest.mark.django_db


def test_superseded_text_is_replayed_with_its_id_and_flagged(turn):
    run = turn("hello there")
    text = StreamFrame.objects.filter(run=run, kind="text").first()
    assert text is not None
    StreamFrame.objects.filter(pk=text.pk).update(superseded=True)
    frames = live._frames_after(run.pk, 0)
    assert [seq for seq, _, _ in frames] == list(range(1, len(frames) + 1))
    flagged = {seq: data.get("superseded", False) for seq, _, data in frames}
    assert flagged[text.seq] is True
    assert sum(flagged.values()) == 1


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
