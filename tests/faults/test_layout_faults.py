"""The SPEC §20 rows under load on the durable runner, in the production layout
(``tests.faults.layout``: gunicorn, uvicorn, two Celery workers and beat, each host in a network
namespace of its own where the machine allows it): Redis restarted empty, PostgreSQL restarted
fast and immediate, a worker frozen past its lease, a task delivered twice, each while runs are
parked, just approved, executing a refund and streaming to open SSE clients.

Checked after each fault (``tests.faults.load.check_layout``): effects exactly once, every
acknowledged decision in the call and the audit, every run ended or parked within
``LEASE + SWEEP + MARGIN`` of the fault's end, every open stream delivered every stored frame once
and in order, the API answered 503 with ``Retry-After`` or succeeded (never 500), and every
process is still the one the layout started, answering.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.faults.layout import Layout, layout_home, running_layout
from tests.faults.load import Freeze, check_layout, fault_under_load, target_of

pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def layout() -> Iterator[Layout]:
    with layout_home() as home, running_layout(home, DEMO_REFUND_DELAY="1") as running:
        yield running


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_postgresql_restarted_under_load(layout: Layout, mode: str) -> None:
    answers = fault_under_load(target_of(layout), lambda: layout.postgres.restart(mode))  # type: ignore[arg-type]
    check_layout(layout, answers)


def test_redis_restarted_empty_under_load(layout: Layout) -> None:
    answers = fault_under_load(target_of(layout), lambda: layout.redis.restart_empty(down=1))
    check_layout(layout, answers)


def test_a_worker_frozen_past_its_lease_under_load(layout: Layout) -> None:
    freeze = Freeze(layout, "w1")
    check_layout(layout, fault_under_load(target_of(layout), freeze))
    freeze.check_taken_over()


def test_a_task_delivered_twice_under_load(layout: Layout) -> None:
    def twice() -> None:
        """A second copy of a step task of every run, parked, executing or just approved."""
        active = "SELECT id FROM agent_core_run WHERE status IN ('queued', 'running', 'waiting')"
        for (run_id,) in layout.rows(active):
            for queue in ("agent.tool", "agent.llm"):
                layout.deliver(run_id, queue)

    check_layout(layout, fault_under_load(target_of(layout), twice))
