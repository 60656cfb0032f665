"""Open streams hold no database connection while they wait (SPEC §15): a connection budget."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from django.conf import settings
from django.db import connection

from tests.conftest import REFUND
from tests.live.conftest import ALICE, start

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

SUBSCRIBERS = 200
# The streams' own reads (a few threads per process, each keeping its connection only while more
# reads wait) and the API requests made meanwhile: a constant, whatever the number of open streams.
BUDGET = 10


def _connections() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s",
            [settings.DATABASES["default"]["NAME"]],
        )
        return int(cursor.fetchone()[0])


async def _subscribe(client: httpx.AsyncClient, url: str, ready: asyncio.Queue[str]) -> None:
    """Hold one stream open: read the replay up to the waiting card, then keep reading."""
    async with client.stream("GET", url, headers=ALICE) as response:
        assert response.status_code == 200
        told = False
        async for line in response.aiter_lines():
            if not told and '"approval-requested"' in line:
                told = True
                await ready.put(line)


async def _hold_streams(base_url: str, run_id: str) -> list[int]:
    limits = httpx.Limits(max_connections=SUBSCRIBERS + 10, max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=base_url, timeout=120, limits=limits) as client:
        ready: asyncio.Queue[str] = asyncio.Queue()
        url = f"/agent/chat/{run_id}/stream"
        tasks = [asyncio.create_task(_subscribe(client, url, ready)) for _ in range(SUBSCRIBERS)]
        try:
            for _ in range(SUBSCRIBERS):
                await asyncio.wait_for(ready.get(), 120)
            # Every stream has replayed the table and now waits on a person; on the server with
            # a one-second keep-alive each re-reads the table every second meanwhile.
            counts = []
            for _ in range(3):
                counts.append(await asyncio.to_thread(_connections))
                api = await client.get(f"/agent/runs/{run_id}", headers=ALICE)
                assert api.status_code == 200, api.text  # the API keeps answering
                await asyncio.sleep(1.0)
            assert not any(task.done() for task in tasks), "a stream ended early"
            return counts
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


def test_two_hundred_waiting_streams_hold_no_database_connection(shop, a, b, servers):
    started = start(a, REFUND, ALICE)
    # Server B (one-second keep-alive) serves the streams; warm it first.
    assert b.get(f"/agent/runs/{started['run_id']}", headers=ALICE).status_code == 200
    time.sleep(0.5)
    before = _connections()
    counts = asyncio.run(_hold_streams(servers[1].url, started["run_id"]))
    assert max(counts) - before <= BUDGET, (before, counts)
    chat = b.post("/agent/chat", json={"agent": "support", "message": "hello"}, headers=ALICE)
    assert chat.status_code == 202  # and the server still starts runs once they are gone
