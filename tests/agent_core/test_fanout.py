"""One live feed per run per process: every local follower gets each message from it."""

from __future__ import annotations

import asyncio
import uuid

from channels.layers import get_channel_layer
from django.conf import settings
from redis import Redis

from agent_core.engine import stream_log
from agent_core.streams import fanout


def _unique_run(name: str) -> str:
    # Pub/sub channels are the Redis server's, not a database's: a run no other suite follows.
    return f"{name}_{uuid.uuid4().hex}"


def _redis() -> Redis:
    return Redis.from_url(settings.REDIS_URL)


async def _followers_share_one_feed() -> None:
    layer = get_channel_layer()
    run_id = _unique_run("run_fanout")

    def subscriptions() -> list[int]:
        with _redis() as redis:
            channels = redis.pubsub_channels(f"*{run_id}")
            return [count for _, count in redis.pubsub_numsub(*channels)] if channels else []

    async with (
        fanout.subscribe(run_id, 60) as first,
        fanout.subscribe(run_id, 60) as second,
    ):
        assert fanout.followed() == {run_id: 2}
        # One subscription in Redis for both followers: a frame is published to it once.
        assert subscriptions() == [1]
        await layer.group_send(stream_log.group_name(run_id), {"type": "run.frames", "n": 1})
        got = [(await asyncio.wait_for(inbox.take(), 10))[0] for inbox in (first, second)]
        assert [m["n"] for m in got] == [1, 1]
    assert fanout.followed() == {}
    await asyncio.sleep(0.1)  # the stopped feed leaves the group
    assert subscriptions() == []


def test_followers_of_a_run_in_one_process_share_one_feed() -> None:
    asyncio.run(_followers_share_one_feed())


async def _next(inbox: fanout.Inbox) -> dict[str, object]:
    """The next message other than ``LOST`` (a receive from Redis that failed under load)."""
    while True:
        for message in await asyncio.wait_for(inbox.take(), 10):
            if message is not fanout.LOST:
                return message


async def _a_quiet_run_is_told_once_per_interval() -> None:
    layer = get_channel_layer()
    loop = asyncio.get_running_loop()
    run_id = _unique_run("run_quiet")
    began = loop.time()  # before the feed starts its interval
    async with fanout.subscribe(run_id, 2.0) as inbox:
        assert await _next(inbox) is fanout.QUIET
        assert loop.time() - began >= 2.0
        await asyncio.sleep(0.3)
        await layer.group_send(stream_log.group_name(run_id), {"type": "run.frames", "n": 1})
        assert (await _next(inbox))["n"] == 1
        # A message restarts the interval: the next QUIET comes a full interval after it.
        delivered = loop.time()
        assert await _next(inbox) is fanout.QUIET
        assert loop.time() - delivered >= 1.5  # less what the hand-over to this task took


def test_a_quiet_run_is_told_once_per_keepalive_interval() -> None:
    asyncio.run(_a_quiet_run_is_told_once_per_interval())


async def _a_feed_follows_again_after_redis_drops_it() -> None:
    layer = get_channel_layer()
    run_id = _unique_run("run_dropped")
    group = stream_log.group_name(run_id)
    async with fanout.subscribe(run_id, 60) as inbox:
        await layer.group_send(group, {"type": "run.frames", "n": 1})
        assert (await _next(inbox))["n"] == 1
        # Redis drops every subscriber's connection (a restart, a failover, a network cut).
        with _redis() as redis:
            redis.client_kill_filter(_type="pubsub")
        # What is published before the layer has subscribed again is lost (a stream reads it from
        # the table), and what follows waits for its receiver's pause (1 s) after the error; the
        # feed itself must not be lost: within seconds it gets what is published, in order.
        got: list[int] = []
        for n in range(2, 100):
            await layer.group_send(group, {"type": "run.frames", "n": n})
            try:
                got += [int(m["n"]) for m in await asyncio.wait_for(inbox.take(), 0.2)]
            except TimeoutError:
                continue
            break
        await layer.group_send(group, {"type": "run.frames", "n": 100})
        while got[-1:] != [100]:
            got += [int(m["n"]) for m in await asyncio.wait_for(inbox.take(), 10)]
        assert got == sorted(got) and len(set(got)) == len(got), got


def test_a_feed_follows_again_after_redis_drops_its_connection() -> None:
    asyncio.run(_a_feed_follows_again_after_redis_drops_it())
