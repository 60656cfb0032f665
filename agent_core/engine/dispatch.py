"""This process's runner, at the bottom of the import graph (SPEC §12).

Code that makes a run runnable hands its id to ``get_runner().dispatch`` after the commit
(``on_commit``), with the kind of step that comes next (``NextStep``) when it knows it. The runner
itself is loaded from a dotted path, the way Django loads a backend, so nothing here imports the
loop that the runners drive.
"""

from __future__ import annotations

import threading
from enum import StrEnum
from typing import Protocol

from django.db import transaction
from django.utils.module_loading import import_string

from ..conf import agent_settings

RUNNERS = {
    "inline": "agent_core.runner.inline.InlineRunner",
    "durable": "agent_core.runner.durable.DurableRunner",
}


class NextStep(StrEnum):
    """What a step's transaction left the run to do: a model step, a tool step, or nothing (it
    parked or ended). It routes the durable runner's next task; that task plans afresh from the
    journal, so a wrong answer costs a hop to the other queue, never a wrong step."""

    MODEL = "llm"
    TOOL = "tool"
    STOP = "stop"


class Runner(Protocol):
    """Something that drives runs: ``dispatch`` is called after the commit that queued one,
    with the kind of its next step when the committing code knows it."""

    def dispatch(self, run_id: str, kind: NextStep | None = None) -> None: ...


_runner: Runner | None = None
_runner_lock = threading.Lock()


def get_runner() -> Runner:
    """This process's runner, built on first use (``AGENT["RUNNER"]``)."""
    global _runner
    with _runner_lock:
        if _runner is None:
            _runner = import_string(RUNNERS[agent_settings().RUNNER])()
        return _runner


def set_runner(runner: Runner | None) -> None:
    """Replace this process's runner (``None``: build a fresh one on next use)."""
    global _runner
    with _runner_lock:
        _runner = runner


def on_commit(run_id: str, kind: NextStep) -> None:
    """Hand the run to this process's runner once the current transaction commits.

    A dispatch that fails (the broker is away) is logged, never raised: what committed stands,
    and the sweeper re-drives the queued run once its lease deadline passes (SPEC §20)."""
    transaction.on_commit(lambda: get_runner().dispatch(run_id, kind), robust=True)


def start_background() -> None:
    """Process start-up: the inline runner sweeps now and keeps its sweeper thread running."""
    if agent_settings().RUNNER == "inline":
        start = getattr(get_runner(), "start", None)
        if start is not None:
            start()
