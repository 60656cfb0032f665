"""The SPEC §20 row of a stalled process on the inline runner, under load: one of two web
processes (gunicorn, each driving the runs it dispatches and sweeping for the other) frozen past
its lease while it drives runs, then resumed. The other takes its runs over; the requests sent to
the frozen one are held until it thaws and then answered. Checked as the durable rows are
(``tests.faults.load.check_layout``). PostgreSQL and Redis restarts on the inline runner:
``test_restarts.py``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.faults.layout import Layout, layout_home, running_inline_layout
from tests.faults.load import Freeze, check_layout, fault_under_load, target_of

pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def layout() -> Iterator[Layout]:
    with layout_home() as home, running_inline_layout(home, DEMO_REFUND_DELAY="1") as running:
        yield running


def test_a_web_process_frozen_past_its_lease_under_load(layout: Layout) -> None:
    freeze = Freeze(layout, "web")
    # Requests go to both web hosts in turn: those to the frozen one are held until it thaws.
    check_layout(layout, fault_under_load(target_of(layout), freeze))
    freeze.check_taken_over()
