"""A worker host cut off from PostgreSQL and Redis for longer than its leases and than the idle
timeout of a transaction, then healed, while runs are parked, approved, executing their refunds
and streaming (SPEC §20): its runs are taken over by the other worker, its late writes are
fenced, no refund runs twice, and nothing is lost. The cut drops the host's packets (its link to
the bridge is down, ``tests.faults.layout``): its connections wait, as across a partition, and
see no error until it heals."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.layout import IDLE, LEASE, SWEEP, Layout, running_layout
from tests.faults.load import (
    check_answers,
    check_decisions_and_effects,
    check_settled,
    fault_under_load,
    in_,
    target_of,
    unended_streams,
)

pytestmark = [pytest.mark.slow]

CUT = LEASE + SWEEP + IDLE + 3
# Past LEASE + SWEEP after the heal: the cut host's connections come back (TCP retries, a few
# seconds), and the runs approved after it take their steps on a 2-core machine.
SETTLED_WITHIN = LEASE + SWEEP + 30


@pytest.fixture(scope="module")
def layout() -> Iterator[Layout]:
    home = Path(tempfile.mkdtemp(prefix="airlock-cut-"))
    try:
        with running_layout(home, DEMO_REFUND_DELAY="1") as running:
            yield running
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_a_worker_cut_off_past_its_leases_then_healed_under_load(layout: Layout) -> None:
    worker = layout.hosts["w1"]

    def partition() -> None:
        worker.cut()
        try:
            time.sleep(CUT)
        finally:
            worker.heal()

    target = target_of(layout)
    answers = fault_under_load(target, partition)
    check_answers(answers)
    check_settled(target, answers, SETTLED_WITHIN)
    check_decisions_and_effects(target, answers)
    assert not unended_streams(target, answers.followers, SETTLED_WITHIN)
    # Nothing lost: no run failed for the cut, and every approved refund happened.
    assert layout.rows("SELECT count(*) FROM agent_core_run WHERE status = 'failed'") == [(0,)]
    succeeded = (
        "SELECT count(*) FROM agent_core_toolcall"
        f" WHERE status = 'succeeded' AND id IN {in_(answers.approved)}"
    )
    assert layout.rows(succeeded) == [(len(answers.approved),)]
    # The cut host came back by itself.
    assert layout.alive(), layout.tail()
