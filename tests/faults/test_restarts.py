"""PostgreSQL restarted (fast, immediate) and Redis restarted empty under a live web process (the
inline runner), with runs parked, just approved and executing a refund when the fault hits
(SPEC §20). Its PostgreSQL and Redis are the test's own (``tests.faults.services``).

Checked after the fault: every approval the API acknowledged is in the call and the audit, every
refund happened at most once and exactly once for a call that succeeded, every run ended or
parked within ``LEASE + SWEEP`` and a margin, the API answered 503 with ``Retry-After`` or
succeeded (never 500) during the fault, and the web process recovered on its own.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from httpx_sse import connect_sse

from tests.conftest import refund
from tests.faults.services import Postgres, Redis, migrated_database, start_postgres, start_redis
from tests.live.conftest import ALICE, start
from tests.live.server import Server, start_server
from tests.processes import manage

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

RUNS = 20
LEASE, SWEEP = 2, 1
# Past LEASE + SWEEP after the fault heals: a server start, the model's and the tool's steps.
SETTLED_WITHIN = LEASE + SWEEP + 20


# The order the runs refund.
SHOP = (
    "from demo.models import Order;"
    " Order.objects.create(pk='A-1001', customer_email='maria@example.com', total=100000)"
)


@dataclass
class Layout:
    postgres: Postgres
    redis: Redis
    web: Server
    database: str

    def rows(self, statement: str) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.database) as conn:
            return conn.execute(statement).fetchall()


@pytest.fixture(scope="module")
def layout() -> Iterator[Layout]:
    # Not pytest's temporary directories: another pytest run on the machine may prune them.
    home = Path(tempfile.mkdtemp(prefix="airlock-faults-"))
    postgres = start_postgres(home / "pg")
    redis = start_redis(home)
    try:
        database = migrated_database(postgres, "airlock_faults")
        shop = manage("shell", "--no-imports", "-c", SHOP, DATABASE_URL=database)
        assert shop.returncode == 0, shop.stderr
        web = start_server(
            home / "web.log",
            DATABASE_URL=database,
            REDIS_URL=redis.url,
            CONN_MAX_AGE="60",  # persistent connections: they must survive a restart
            AIRLOCK_TEST_LEASE_SECONDS=str(LEASE),
            AIRLOCK_SWEEP_SECONDS=str(SWEEP),
            DEMO_REFUND_DELAY="1",
        )
        try:
            yield Layout(postgres, redis, web, database)
        finally:
            web.stop()
    finally:
        redis.stop()
        postgres.stop()
        shutil.rmtree(home, ignore_errors=True)


class Follower(threading.Thread):
    """An SSE client of one run that reconnects after a dropped stream or a 503 with the last
    id it has (``Last-Event-ID``), until the run's stream ends: the frame ids it got."""

    def __init__(self, url: str, run_id: str) -> None:
        super().__init__(daemon=True)
        self.url, self.run_id, self.got = url, run_id, list[int]()
        self.ended = False

    def run(self) -> None:
        deadline = time.monotonic() + 120  # a guard: the test fails on ``ended``
        while not self.ended and time.monotonic() < deadline:
            try:
                self._attach()
            except httpx.TransportError:
                time.sleep(0.2)

    def _attach(self) -> None:
        last = str(self.got[-1] if self.got else 0)
        with (
            httpx.Client(base_url=self.url, timeout=60) as client,
            connect_sse(
                client,
                "GET",
                f"/agent/chat/{self.run_id}/stream",
                headers={**ALICE, "Last-Event-ID": last},
            ) as source,
        ):
            if source.response.status_code == 503:
                time.sleep(1)
                return
            for event in source.iter_sse():
                if event.event == "message":  # a frame (a named event repeats the last id)
                    self.got.append(int(event.id))
                if event.event in ("done", "error"):
                    self.ended = True
                    return


@dataclass
class Answers:
    """Every answer the API gave while the fault was on: status and ``Retry-After``."""

    statuses: list[tuple[int, str | None]] = field(default_factory=list)
    approved: list[str] = field(default_factory=list)
    followers: list[Follower] = field(default_factory=list)


def _approve(client: httpx.Client, call_id: str, answers: Answers) -> None:
    try:
        response = client.post(
            "/agent/tool-call/approve", json={"tool_call_id": call_id}, headers=ALICE
        )
    except httpx.TransportError:
        return  # no answer: nothing acknowledged
    answers.statuses.append((response.status_code, response.headers.get("Retry-After")))
    if response.status_code == 200:
        answers.approved.append(call_id)


def _parked(layout: Layout, client: httpx.Client) -> list[tuple[str, str]]:
    """``RUNS`` runs parked on a refund: their calls' and runs' ids."""
    runs = [start(client, refund(50), ALICE)["run_id"] for _ in range(RUNS)]
    wait = f"SELECT count(*) FROM agent_core_run WHERE status = 'waiting' AND id IN {_in(runs)}"
    _until("every run parks", lambda: layout.rows(wait)[0][0] == RUNS)
    calls = f"SELECT id, run_id FROM agent_core_toolcall WHERE run_id IN {_in(runs)}"
    return [(row[0], row[1]) for row in layout.rows(calls)]


def _in(ids: list[str]) -> str:
    return "(" + ", ".join(f"'{i}'" for i in ids) + ")"


def _until(what: str, holds: Callable[[], bool], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not holds():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.1)


def _fault_under_load(layout: Layout, fault: Callable[[], None]) -> Answers:
    """Approve a third of the parked calls, followed by open streams, then the next third while
    ``fault`` happens (the first third's refunds executing), then the rest after it."""
    answers = Answers()
    with httpx.Client(base_url=layout.web.url, timeout=30) as client:
        calls = _parked(layout, client)
        third = RUNS // 3
        first, during, after = calls[:third], calls[third : 2 * third], calls[2 * third :]
        for call_id, run_id in first:
            follower = Follower(layout.web.url, run_id)
            follower.start()
            answers.followers.append(follower)
            _approve(client, call_id, answers)
        faulting = threading.Thread(target=fault)
        faulting.start()
        for call_id, _ in during:
            _approve(client, call_id, answers)
        faulting.join()
        for call_id, _ in after:
            _approve(client, call_id, answers)
    return answers


def _check(layout: Layout, answers: Answers) -> None:
    # The API answered, or said when to come back: never a 500.
    assert all(status in (200, 503) for status, _ in answers.statuses), answers.statuses
    assert all(wait is not None for status, wait in answers.statuses if status == 503)
    # Every run ends or parks.
    active = "SELECT count(*) FROM agent_core_run WHERE status IN ('queued', 'running')"
    _until("every run to end or park", lambda: layout.rows(active)[0][0] == 0, SETTLED_WITHIN)
    # Every acknowledged approval is in the call and the audit.
    decided = layout.rows(
        "SELECT c.id, c.status, count(a.id) FROM agent_core_toolcall c"
        " LEFT JOIN approvals_decisionattempt a ON a.tool_call_id = c.id AND a.outcome = 'applied'"
        f" WHERE c.id IN {_in(answers.approved)} GROUP BY c.id, c.status"
    )
    assert len(decided) == len(answers.approved)
    assert all(status != "pending_approval" and audited >= 1 for _, status, audited in decided)
    # Effects once: one refund per call that succeeded, none twice.
    refunds = layout.rows(
        "SELECT c.id, c.status, count(r.id) FROM agent_core_toolcall c"
        " LEFT JOIN demo_refund r ON r.tool_call_id = c.id GROUP BY c.id, c.status"
    )
    assert all(n == (1 if status == "succeeded" else 0) for _, status, n in refunds), refunds
    # The web process recovered on its own.
    assert layout.web.process.poll() is None
    with httpx.Client(base_url=layout.web.url, timeout=30) as client:
        assert client.get("/agent/approvals/pending", headers=ALICE).status_code == 200
    _check_streams(layout, answers.followers)


def _check_streams(layout: Layout, followers: list[Follower]) -> None:
    """Open streams delivered every frame, in order, across the fault, each frame once, and
    ended with their run. (A read of the table that found PostgreSQL away used to end the stream
    with an error after its response had started; daphne then left the client waiting on an
    open connection.)"""
    for follower in followers:
        follower.join(SETTLED_WITHIN)
        run = f"'{follower.run_id}'"
        stored = [
            seq
            for (seq,) in layout.rows(
                f"SELECT seq FROM agent_core_streamframe WHERE run_id = {run} ORDER BY seq"
            )
        ]
        assert follower.ended, f"{follower.run_id}: not ended after {follower.got} of {stored}"
        assert follower.got == stored, follower.run_id


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_postgresql_restarted_under_load(layout: Layout, mode: str) -> None:
    answers = _fault_under_load(layout, lambda: layout.postgres.restart(mode))  # type: ignore[arg-type]
    _check(layout, answers)


def test_redis_restarted_empty_under_load(layout: Layout) -> None:
    answers = _fault_under_load(layout, lambda: layout.redis.restart_empty(down=1))
    _check(layout, answers)
