"""The SPEC §20 rows under load on the durable runner, in the production layout
(``tests.faults.layout``: gunicorn, uvicorn, two Celery workers and beat, each host in a network
namespace of its own where the machine allows it): Redis restarted empty, PostgreSQL restarted
fast and immediate, a worker frozen past its lease, a task delivered twice, each while runs are
parked, just approved, executing a refund and streaming to open SSE clients.

Checked after each fault: effects exactly once, every acknowledged decision in the call and the
audit, every run ended or parked within ``LEASE + SWEEP + MARGIN`` of the fault's end, every open
stream delivered every stored frame once and in order, the API answered 503 with
``Retry-After`` or succeeded (never 500), and every process is still the one the layout started.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.faults.layout import LEASE, SWEEP, Layout, running_layout
from tests.faults.load import (
    Answers,
    Target,
    check_answers,
    check_decisions_and_effects,
    check_settled,
    fault_under_load,
    unended_streams,
)
from tests.live.conftest import ALICE

pytestmark = [pytest.mark.slow]

# Past LEASE + SWEEP after the fault: the runs approved after it (a third of them) take their
# model, tool and model steps on two workers of two processes each, on a 2-core machine.
MARGIN = 30
SETTLED_WITHIN = LEASE + SWEEP + MARGIN


@pytest.fixture(scope="module")
def layout(django_db_blocker: object) -> Iterator[Layout]:
    # Not pytest's temporary directories: another pytest run on the machine may prune them.
    home = Path(tempfile.mkdtemp(prefix="airlock-layout-"))
    try:
        with running_layout(home, DEMO_REFUND_DELAY="1") as running:
            yield running
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _target(layout: Layout) -> Target:
    return Target(layout.web, layout.streams, layout.rows)


def _check(layout: Layout, answers: Answers) -> None:
    target = _target(layout)
    check_answers(answers)
    check_settled(target, answers, SETTLED_WITHIN)
    check_decisions_and_effects(target, answers)
    unended = unended_streams(target, answers.followers, SETTLED_WITHIN)
    assert not unended, unended
    # Every process recovered on its own: the ones the layout started, answering.
    assert layout.alive(), layout.tail()
    with httpx.Client(base_url=layout.web, timeout=30) as client:
        assert client.get("/agent/approvals/pending", headers=ALICE).status_code == 200


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_postgresql_restarted_under_load(layout: Layout, mode: str) -> None:
    answers = fault_under_load(_target(layout), lambda: layout.postgres.restart(mode))  # type: ignore[arg-type]
    _check(layout, answers)


def test_redis_restarted_empty_under_load(layout: Layout) -> None:
    answers = fault_under_load(_target(layout), lambda: layout.redis.restart_empty(down=1))
    _check(layout, answers)


def test_a_worker_frozen_past_its_lease_under_load(layout: Layout) -> None:
    worker = layout.hosts["w1"]

    def freeze() -> None:
        worker.freeze()
        time.sleep(LEASE + SWEEP + 2)
        worker.thaw()

    _check(layout, fault_under_load(_target(layout), freeze))


def test_a_task_delivered_twice_under_load(layout: Layout) -> None:
    def twice(call_id: str, run_id: str) -> None:
        for queue in ("agent.tool", "agent.llm"):
            layout.deliver(run_id, queue)

    _check(layout, fault_under_load(_target(layout), lambda: time.sleep(2), during=twice))
