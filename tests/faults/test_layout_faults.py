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

import contextlib
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.faults.layout import LEASE, SWEEP, Layout, running_inline_layout, running_layout
from tests.faults.load import (
    Answers,
    Target,
    check_answers,
    check_decisions_and_effects,
    check_settled,
    fault_under_load,
    unended_streams,
    until,
)
from tests.live.conftest import ALICE

pytestmark = [pytest.mark.slow]

# Past LEASE + SWEEP after the fault: the runs approved after it (a third of them) take their
# model, tool and model steps on two workers of two processes each, on a 2-core machine.
MARGIN = 30
# A frozen worker's open transaction ends this soon (``IDLE_IN_TRANSACTION_SECONDS``); a refund
# sleeps 1 s inside its own.
IDLE = 3
ENV = {"DEMO_REFUND_DELAY": "1", "AIRLOCK_TEST_IDLE_IN_TRANSACTION_SECONDS": str(IDLE)}
SETTLED_WITHIN = LEASE + SWEEP + MARGIN


@pytest.fixture(scope="module")
def layout() -> Iterator[Layout]:
    with _home() as home, running_layout(home, **ENV) as running:
        yield running


@pytest.fixture(scope="module")
def inline_layout() -> Iterator[Layout]:
    with _home() as home, running_inline_layout(home, **ENV) as running:
        yield running


@contextlib.contextmanager
def _home() -> Iterator[Path]:
    # Not pytest's temporary directories: another pytest run on the machine may prune them.
    home = Path(tempfile.mkdtemp(prefix="airlock-layout-"))
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _target(layout: Layout) -> Target:
    """The load on every web host of the layout in turn."""
    webs = tuple(url for name, url in layout.urls.items() if name.startswith("web"))
    return Target(webs, layout.streams, layout.rows)


def _check(layout: Layout, answers: Answers) -> None:
    target = _target(layout)
    check_answers(answers)
    check_settled(target, answers, SETTLED_WITHIN)
    check_decisions_and_effects(target, answers)
    unended = unended_streams(target, answers.followers, SETTLED_WITHIN)
    assert not unended, unended
    # Every process recovered on its own: the ones the layout started, answering.
    assert layout.alive(), layout.tail()
    for web in target.webs:
        with httpx.Client(base_url=web, timeout=30) as client:
            assert client.get("/agent/approvals/pending", headers=ALICE).status_code == 200


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_postgresql_restarted_under_load(layout: Layout, mode: str) -> None:
    answers = fault_under_load(_target(layout), lambda: layout.postgres.restart(mode))  # type: ignore[arg-type]
    _check(layout, answers)


def test_redis_restarted_empty_under_load(layout: Layout) -> None:
    answers = fault_under_load(_target(layout), lambda: layout.redis.restart_empty(down=1))
    _check(layout, answers)


class Freeze:
    """SIGSTOP a host while it drives runs, past its lease and its transaction's end, then
    SIGCONT: the runs it drove (their lease tokens then) and their tokens just before it thawed."""

    def __init__(self, layout: Layout, name: str) -> None:
        self.layout, self.host = layout, layout.hosts[name]
        self.held: dict[str, int] = {}
        self.taken: dict[str, int] = {}

    def __call__(self) -> None:
        until("the host to freeze while it drives a run", self._frozen_driving, 10)
        time.sleep(max(LEASE, IDLE) + SWEEP + 2)
        self.taken.update(
            self.layout.rows(
                "SELECT id, lease_token FROM agent_core_run WHERE id = ANY(%s)", [list(self.held)]
            )
        )
        self.host.thaw()

    def _frozen_driving(self) -> bool:
        """Frozen while it drives a run (read after the freeze: nothing it holds moves)."""
        self.host.freeze()
        owners = {f":{pid}:" for pid in self.host.pids()}
        self.held.update(
            (run_id, token)
            for run_id, owner, token in self.layout.rows(
                "SELECT id, lease_owner, lease_token FROM agent_core_run WHERE status = 'running'"
            )
            if any(pid in owner for pid in owners)
        )
        if not self.held:
            self.host.thaw()
            time.sleep(0.05)
        return bool(self.held)

    def check_taken_over(self) -> None:
        """Another driver leased each run while the host was frozen."""
        assert self.held, "the host drove no run when it froze"
        assert all(self.taken[run] > token for run, token in self.held.items()), self.__dict__


def test_a_worker_frozen_past_its_lease_under_load(layout: Layout) -> None:
    freeze = Freeze(layout, "w1")
    _check(layout, fault_under_load(_target(layout), freeze))
    freeze.check_taken_over()


def test_a_web_process_of_the_inline_runner_frozen_past_its_lease_under_load(
    inline_layout: Layout,
) -> None:
    freeze = Freeze(inline_layout, "web")
    # Requests go to both web hosts in turn: those to the frozen one are held until it thaws.
    _check(inline_layout, fault_under_load(_target(inline_layout), freeze))
    freeze.check_taken_over()


def test_a_task_delivered_twice_under_load(layout: Layout) -> None:
    def twice() -> None:
        """A second copy of a step task of every run, parked, executing or just approved."""
        active = "SELECT id FROM agent_core_run WHERE status IN ('queued', 'running', 'waiting')"
        for (run_id,) in layout.rows(active):
            for queue in ("agent.tool", "agent.llm"):
                layout.deliver(run_id, queue)

    _check(layout, fault_under_load(_target(layout), twice))
