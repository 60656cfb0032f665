"""``with_airlock(app)``: the one line a project's Celery module adds for the durable runner.

It routes the sweep to ``agent.llm`` and approvals' notification deliveries to ``agent.tool`` (the
durable runner sends each step task to the queue of the run's next step itself:
``AGENT["MODEL_QUEUE"]``, ``AGENT["TOOL_QUEUE"]`` or a tool's own ``queue``, see
``agent_core.runner.queues``), keeps the project's own routes, takes one message at a time per
worker process, and schedules the sweeper on beat every ``AGENT["SWEEP_SECONDS"]``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from celery import Celery

# Task names (the durable runner sends them by name). This module imports nothing of Django's:
# the project's Celery module imports it before Django is set up.
STEP_TASK = "agent_core.advance_run"
SWEEP_TASK = "agent_core.sweep"
NOTIFY_TASK = "approvals.deliver_notification"
TASK_ROUTES = {
    SWEEP_TASK: {"queue": "agent.llm"},
    # approvals' notifications leave the system as a tool's side effects do (the default
    # AGENT["TOOL_QUEUE"]); a project's own route for the task wins.
    NOTIFY_TASK: {"queue": "agent.tool"},
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
