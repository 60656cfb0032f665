"""One live feed per run per process, handed in memory to every local follower.

A follower used to join the run's channel-layer group with a channel of its own, so every frame
cost one Redis write per follower (25 followers of a run per daphne process kept p99 under 100 ms,
50 did not). Here the first follower of a run in an event loop starts its *feed*: one channel in
the run's group and one task that receives from it and puts each message in the inbox of every
local follower. The last follower to leave stops it. Whatever the number of followers, a
process holds one membership of the run's group: with the pub/sub layer (the documented
setting) one Redis subscription, so a frame is one PUBLISH whatever the number of processes
that follow the run; with the core layer, one Redis write per such process.

Delivery stays best effort: a follower whose inbox is full misses the message (and sees the gap
in ``seq``, or waits for its keep-alive, then reads the table); a failed receive tells every
follower to read the table (``LOST``). The pub/sub layer receives from Redis on a task of its own
and subscribes again after a lost connection, pausing a second: what was published meanwhile
comes late, or is lost and shows as a gap in ``seq`` or a quiet interval, after which the
follower reads the table (``tests/agent_core/test_fanout.py``). A feed that cannot join its group
(Redis away) lets its followers in all the same and tells them to read the table every
``_REJOIN_SECONDS`` until it joins: a stream keeps following the run from PostgreSQL. When no
message has come for the keep-alive interval, the feed tells every follower so (``QUIET``): one
timer per run per process, not one per follower and message.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from channels.layers import get_channel_layer

from ..engine import stream_log

logger = logging.getLogger(__name__)

# What a follower gets when the feed's receive failed: read the table, it has every frame.
LOST: dict[str, Any] = {"type": "run.lost"}
# What a follower gets when the run has been quiet for the keep-alive interval.
QUIET: dict[str, Any] = {"type": "run.quiet"}
# Messages one follower may have waiting; a client that reads slower than that misses some.
QUEUE_SIZE = 1000
_RETRY_SECONDS = 0.2
# How often a feed that could not join its group (Redis away) tries again; its followers read
# the table as often.
_REJOIN_SECONDS = 1.0


class Inbox:
    """A follower's messages: ``put`` by the feed, ``take``n all at once by the follower (what
    queued up while it wrote goes out in one write). Lighter than an ``asyncio.Queue``, which
    costs more per message than the rest of a delivery to a thousand followers."""

    def __init__(self) -> None:
        self._messages: list[dict[str, Any]] = []
        self._waiter: asyncio.Future[None] | None = None

    def put(self, message: dict[str, Any]) -> None:
        if len(self._messages) >= QUEUE_SIZE:
            return  # that follower sees a gap (or its keep-alive) and reads the table
        self._messages.append(message)
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def take(self) -> list[dict[str, Any]]:
        """Every message put since the last ``take``, waiting for one if there is none."""
        while not self._messages:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        messages, self._messages = self._messages, []
        return messages


@dataclass
class _Feed:
    run_id: str
    joined: asyncio.Future[None]
    followers: set[Inbox] = field(default_factory=set)
    task: asyncio.Task[None] | None = None
    last: float = 0.0  # the loop's time of the last message delivered
    timer: asyncio.TimerHandle | None = None  # the next QUIET check


# One table of feeds per event loop: a layer's connections belong to the loop that made them.
_feeds: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, _Feed]] = (
    weakref.WeakKeyDictionary()
)


@asynccontextmanager
async def subscribe(run_id: str, keepalive: float) -> AsyncIterator[Inbox]:
    """An inbox of the run's live messages, from the moment this returns (the feed has joined the
    run's group by then, so a frame committed after it is delivered), and ``QUIET`` whenever the
    run's feed has had nothing for ``keepalive`` seconds (the first follower's interval)."""
    loop = asyncio.get_running_loop()
    feeds = _feeds.setdefault(loop, {})
    feed = feeds.get(run_id)
    if feed is None:
        feed = _Feed(run_id, loop.create_future())
        feeds[run_id] = feed
        feed.task = loop.create_task(_pump(feed, keepalive), name=f"airlock-feed-{run_id}")
    inbox = Inbox()
    feed.followers.add(inbox)
    try:
        await asyncio.shield(feed.joined)
        yield inbox
    finally:
        feed.followers.discard(inbox)
        if not feed.followers and feeds.get(run_id) is feed:
            del feeds[run_id]
            assert feed.task is not None
            feed.task.cancel()


def followed(loop: asyncio.AbstractEventLoop | None = None) -> dict[str, int]:
    """Runs followed in this event loop and their local followers (for tests and diagnostics)."""
    feeds = _feeds.get(loop or asyncio.get_running_loop(), {})
    return {run_id: len(feed.followers) for run_id, feed in feeds.items()}


async def _pump(feed: _Feed, keepalive: float) -> None:
    layer = get_channel_layer()
    assert layer is not None, "CHANNEL_LAYERS must be configured to follow runs live"
    group = stream_log.group_name(feed.run_id)
    loop = asyncio.get_running_loop()
    feed.last = loop.time()
    feed.timer = loop.call_later(keepalive, _tick, feed, keepalive)
    channel: str | None = None
    try:
        channel = await _join(feed, layer, group)
        while True:
            try:
                message = await layer.receive(channel)
            except Exception:
                # A Redis hiccup (e.g. a read timeout under load): the table still has every frame.
                logger.warning("live feed of %s failed", feed.run_id, exc_info=True)
                _deliver(feed, LOST)
                await asyncio.sleep(_RETRY_SECONDS)
                continue
            _deliver(feed, message)
    except asyncio.CancelledError:
        if not feed.joined.done():
            _forget(feed)
            feed.joined.cancel()
        raise
    finally:
        feed.timer.cancel()
        if channel is not None:
            await layer.group_discard(group, channel)


async def _join(feed: _Feed, layer: Any, group: str) -> str:
    """Join the run's group; while Redis is away, try again every ``_REJOIN_SECONDS``, and tell
    the followers, who are let in at once, to read the table meanwhile (``LOST``)."""
    while True:
        try:
            channel: str = await layer.new_channel()
            await layer.group_add(group, channel)
        except Exception:
            logger.warning("live feed of %s cannot join its group", feed.run_id, exc_info=True)
            if not feed.joined.done():
                feed.joined.set_result(None)
            _deliver(feed, LOST)
            await asyncio.sleep(_REJOIN_SECONDS)
            continue
        if feed.joined.done():  # joined late: what was published before is in the table
            _deliver(feed, LOST)
        else:
            feed.joined.set_result(None)
        return channel


def _tick(feed: _Feed, keepalive: float) -> None:
    loop = asyncio.get_running_loop()
    quiet = loop.time() - feed.last
    if quiet >= keepalive:
        _deliver(feed, QUIET)
        quiet = 0.0
    feed.timer = loop.call_later(keepalive - quiet, _tick, feed, keepalive)


def _deliver(feed: _Feed, message: dict[str, Any]) -> None:
    feed.last = asyncio.get_running_loop().time()
    for inbox in feed.followers:
        inbox.put(message)


def _forget(feed: _Feed) -> None:
    feeds = _feeds.get(asyncio.get_running_loop(), {})
    if feeds.get(feed.run_id) is feed:
        del feeds[feed.run_id]
