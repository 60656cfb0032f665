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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.faults.layout import SHOP
from tests.faults.load import (
    Answers,
    Follower,
    Target,
    check_answers,
    check_decisions_and_effects,
    check_settled,
    fault_under_load,
    unended_streams,
)
from tests.faults.services import Postgres, Redis, migrated_database, start_postgres, start_redis
from tests.live.conftest import ALICE
from tests.live.server import Server, start_server
from tests.processes import manage

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

LEASE, SWEEP = 2, 1
# Past LEASE + SWEEP after the fault heals: a server start, the model's and the tool's steps.
SETTLED_WITHIN = LEASE + SWEEP + 20


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


def _target(layout: Layout) -> Target:
    return Target((layout.web.url,), layout.web.url, layout.rows)


def _check(layout: Layout, answers: Answers) -> None:
    target = _target(layout)
    check_answers(answers)
    check_settled(target, answers, SETTLED_WITHIN)
    check_decisions_and_effects(target, answers)
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
    unended = unended_streams(_target(layout), followers, SETTLED_WITHIN)
    assert not unended, "; ".join(unended)


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_postgresql_restarted_under_load(layout: Layout, mode: str) -> None:
    answers = fault_under_load(_target(layout), lambda: layout.postgres.restart(mode))  # type: ignore[arg-type]
    _check(layout, answers)


def test_redis_restarted_empty_under_load(layout: Layout) -> None:
    answers = fault_under_load(_target(layout), lambda: layout.redis.restart_empty(down=1))
    _check(layout, answers)
