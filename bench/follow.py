"""The benchmark's threads follow their runs' live streams instead of polling the run's row.

A durable cycle's thread waits while a worker drives its run. It used to read the run's status
every 5 ms: with 8 cycles in flight that was ~45 reads a cycle, about a quarter of the machine's
CPU between the benchmark and PostgreSQL (``bench/durable_cpu.py``), taken from the system it
measures. A client follows the run's stream instead (SSE, WebSocket); so does the benchmark now,
through the same live feed (``agent_core.streams.fanout``: one subscription per run, on one event
loop
thread of this process). A thread reads the run's row once it is subscribed and again after a
frame that commits with what it waits for (``approval-requested`` with the park, ``finish`` with
the end, ``delegated`` with the child run), or after ``FALLBACK`` seconds without one: a message
lost on the way delays the wait, it never ends it wrong.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from agent_core.streams import fanout

FALLBACK = 0.5  # seconds a wait goes on without news before it reads the row anyway
ANY = ""  # what a message without frames brings: read the row


class News:
    """The kinds of frame the followed run's stream brought since a wait for them."""

    def __init__(self) -> None:
        self._kinds: set[str] = set()
        self._came = threading.Condition()

    def put(self, messages: list[dict[str, Any]]) -> None:
        with self._came:
            for message in messages:
                # A lost feed (or a quiet one) brings no frames: it wakes every wait.
                found = message.get("frames", [{"kind": ANY}])
                self._kinds.update(frame["kind"] for frame in found)
            self._came.notify_all()

    def wait(self, kind: str) -> None:
        """Until a frame of ``kind`` came (at once if one came since the last wait for it), or
        ``FALLBACK`` seconds passed."""
        with self._came:
            self._came.wait_for(lambda: kind in self._kinds or ANY in self._kinds, FALLBACK)
            self._kinds.discard(kind)
            self._kinds.discard(ANY)


class Follower:
    """One event loop thread that follows runs for the benchmark's threads."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        threading.Thread(target=self._loop.run_forever, name="bench-follower", daemon=True).start()

    @contextmanager
    def following(self, run_id: str) -> Iterator[News]:
        """The run's news, from the moment this returns: read the row after it, then ``wait``."""
        news, joined = News(), threading.Event()
        task = asyncio.run_coroutine_threadsafe(self._follow(run_id, news, joined), self._loop)
        while not joined.wait(0.05):
            if task.done():
                task.result()  # the subscription failed: raise its error here
        try:
            yield news
        finally:
            task.cancel()  # cancels the loop's task, which leaves the run's feed

    @staticmethod
    async def _follow(run_id: str, news: News, joined: threading.Event) -> None:
        async with fanout.subscribe(run_id, keepalive=3600) as inbox:
            joined.set()
            while True:
                news.put(await inbox.take())


_follower: Follower | None = None
_lock = threading.Lock()


def following(run_id: str) -> AbstractContextManager[News]:
    """The run's news (``Follower.following``), on the process's one follower thread."""
    global _follower
    with _lock:
        if _follower is None:
            _follower = Follower()
    return _follower.following(run_id)
