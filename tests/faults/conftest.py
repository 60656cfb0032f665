"""Fixtures of the fault tests: runs of the ``outage`` agent approved and left for the test to
drive (``tests.faults.agents``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db.models.functions import Now

from agent_core.engine import runs
from agent_core.engine.dispatch import set_runner
from agent_core.models import Run
from agent_core.runner.inline import InlineRunner
from approvals import services as port
from tests.conftest import ALICE, calls_of


class Unserved:
    """A runner nothing drives yet: the test takes the run's steps itself (or its processes do)."""

    def dispatch(self, run_id: str, kind: Any = None) -> None:
        return None


def start_unserved(agent: str, message: str) -> Run:
    """A run started and left queued, driven by nobody."""
    set_runner(Unserved())
    try:
        return runs.start_run(agent=agent, message=message, actor=ALICE)
    finally:
        set_runner(None)


@pytest.fixture
def approved(shop: None) -> Iterator[Callable[[str], Run]]:
    """Start a turn of the ``outage`` agent, approve its call, and return the run, not driven."""

    def start(message: str) -> Run:
        set_runner(InlineRunner(workers=0))
        run = runs.start_run(agent="outage", message=message, actor=ALICE)
        [call] = calls_of(run)
        set_runner(Unserved())
        port.approve(call.pk, actor=ALICE)
        return run

    try:
        yield start
    finally:
        set_runner(None)


def lease_runs_out(run: Run) -> None:
    """The run's lease deadline passes (on the database's clock)."""
    Run.objects.filter(pk=run.pk).update(lease_expires_at=Now() - timedelta(seconds=1))
