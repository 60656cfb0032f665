"""Open streams (SSE and WebSocket) hold no database connection while they wait (SPEC §15)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import httpx
import pytest
from django.conf import settings
from django.db import connection
from websockets.asyncio.client import connect
from websockets.typing import Origin

from tests.api.conftest import ALICE, start
from tests.conftest import REFUND

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# The streams' own reads (a few threads per process, each connection closed after its read) and
# the API requests made meanwhile: a constant, whatever the number of open streams.
BUDGET = 10


def _connections() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s",
            [settings.DATABASES["default"]["NAME"]],
        )
        return int(cursor.fetchone()[0])


async def _follow_sse(base_url: str, run_id: str, ready: asyncio.Queue[None]) -> None:
    """Hold one SSE stream open: read the replay up to the waiting card, then keep reading."""
    limits = httpx.Limits(max_keepalive_connections=0)
    async with (
        httpx.AsyncClient(base_url=base_url, timeout=120, limits=limits) as client,
        client.stream("GET", f"/agent/chat/{run_id}/stream", headers=ALICE) as response,
    ):
        assert response.status_code == 200
        told = False
        async for line in response.aiter_lines():
            if not told and '"approval-requested"' in line:
                told = True
                await ready.put(None)


async def _follow_ws(base_url: str, run_id: str, ready: asyncio.Queue[None]) -> None:
    """The same over the WebSocket route."""
    url = base_url.replace("http://", "ws://") + f"/agent/chat/{run_id}/ws"
    origin = Origin("http://" + url.split("/")[2])
    async with connect(url, additional_headers=ALICE, origin=origin, open_timeout=120) as ws:
        told = False
        async for message in ws:
            if not told and '"approval-requested"' in str(message):
                told = True
                await ready.put(None)


Follow = Callable[[str, str, asyncio.Queue[None]], Awaitable[None]]


async def _hold(follow: Follow, base_url: str, run_id: str, count: int) -> list[int]:
    """Open ``count`` subscribers, then sample the connection count while the API answers."""
    ready: asyncio.Queue[None] = asyncio.Queue()
    tasks: list[asyncio.Future[None]] = [
        asyncio.ensure_future(follow(base_url, run_id, ready)) for _ in range(count)
    ]
    try:
        for _ in range(count):
            await asyncio.wait_for(ready.get(), 120)
        # Every subscriber has replayed the table and now waits on a person; on the server with
        # a one-second keep-alive each re-reads the table every second meanwhile.
        counts = []
        async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
            for _ in range(3):
                counts.append(await asyncio.to_thread(_connections))
                api = await client.get(f"/agent/runs/{run_id}", headers=ALICE)
                assert api.status_code == 200, api.text  # the API keeps answering
                await asyncio.sleep(1.0)
        dropped = [task for task in tasks if task.done()]
        assert not dropped, f"{len(dropped)} dropped: {dropped[0].exception()!r}"
        return counts
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@pytest.mark.parametrize(("follow", "count"), [(_follow_sse, 200), (_follow_ws, 100)])
def test_waiting_subscribers_hold_no_database_connection(shop, a, b, servers, follow, count):
    started = start(a, REFUND, ALICE)
    # Server B (one-second keep-alive) serves the subscribers; warm it first.
    assert b.get(f"/agent/runs/{started['run_id']}", headers=ALICE).status_code == 200
    time.sleep(0.5)
    before = _connections()
    counts = asyncio.run(_hold(follow, servers[1].url, started["run_id"], count))
    assert max(counts) - before <= BUDGET, (before, counts)
    chat = b.post("/agent/chat", json={"agent": "support", "message": "hello"}, headers=ALICE)
    assert chat.status_code == 202  # and the server still starts runs once they are gone
