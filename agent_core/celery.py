"""``with_airlock(app)``: the one line a project's Celery module adds for the durable runner.

It routes the step tasks to their queues (``agent.llm`` for model steps and the sweep,
``agent.tool`` for tool steps: tool workers can live where the credentials are), keeps the
project's own routes, takes one message at a time per worker process, and schedules the sweeper
on beat every ``AGENT["SWEEP_SECONDS"]``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from celery import Celery

# Task names (the durable runner sends them by name). This module imports nothing of Django's:
# the project's Celery module imports it before Django is set up.
MODEL_TASK = "agent_core.model_step"
TOOL_TASK = "agent_core.tool_step"
SWEEP_TASK = "agent_core.sweep"
MODEL_QUEUE = "agent.llm"
TOOL_QUEUE = "agent.tool"
TASK_ROUTES = {
    MODEL_TASK: {"queue": MODEL_QUEUE},
    TOOL_TASK: {"queue": TOOL_QUEUE},
    SWEEP_TASK: {"queue": MODEL_QUEUE},
}


def with_airlock(app: Celery) -> Celery:
    """Add Airlock's routes and beat schedule to the project's Celery ``app``; returns it."""
    app.on_after_configure.connect(_configure, sender=app, weak=False)
    app.on_after_finalize.connect(_schedule_sweep, sender=app, weak=False)
    app.airlock = True  # type: ignore[attr-defined]  # what the system check looks for
    return app


def _configure(sender: Celery, **kwargs: Any) -> None:
    conf = sender.conf
    routes = conf.task_routes
    # A project's own routes (a dict) keep working; the Airlock tasks' queues are added to them.
    if isinstance(routes, dict):
        conf.task_routes = {**TASK_ROUTES, **routes}
    else:
        conf.task_routes = [TASK_ROUTES, *(routes or ())]
    # A step is acknowledged after it ran (acks_late on each task) and a worker holds one step
    # at a time: a killed worker's step goes back to the queue, not into a lost prefetch buffer.
    conf.worker_prefetch_multiplier = 1
    conf.task_reject_on_worker_lost = True


def _schedule_sweep(sender: Celery, **kwargs: Any) -> None:
    from .conf import agent_settings

    sender.add_periodic_task(
        float(agent_settings().SWEEP_SECONDS),
        sender.signature(SWEEP_TASK),
        name="airlock.sweep",
    )
