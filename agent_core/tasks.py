"""Celery tasks of the durable runner: ids in, runner code does the work (SPEC §12).

A step task is sent to the queue of the run's next step (``agent_core.runner.queues``);
``acks_late``, prefetch 1 and reject-on-worker-lost come from the Celery settings. Step tasks
are never retried by Celery itself (a retryable model error is re-enqueued by the
runner with a backoff, and a tool step that died is resolved by the loop's in-doubt rules).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from celery import shared_task
from celery.signals import worker_ready
from django.db import close_old_connections

from .celery import STEP_TASK, SWEEP_TASK
from .engine.dispatch import get_runner
from .runner import durable
from .runner.sweep import sweep as sweep_runs


def _runner() -> durable.DurableRunner:
    runner = get_runner()
    if not isinstance(runner, durable.DurableRunner):
        runner = durable.DurableRunner()
    return runner


@contextmanager
def _like_a_request() -> Iterator[None]:
    # A connection past CONN_MAX_AGE, or broken, is not carried into the next task
    # (CELERY_DB_REUSE_MAX keeps Celery from closing every connection around every task).
    close_old_connections()
    try:
        yield
    finally:
        close_old_connections()


@shared_task(name=STEP_TASK, acks_late=True, ignore_result=True)
def advance_run(run_id: str, queue: str, token: int | None = None) -> None:
    """Take the run's next steps that belong on ``queue`` (the queue this task was sent to);
    ``token``: the lease passed on by the task before."""
    with _like_a_request():
        _runner().drive(run_id, queue, token=token)


@shared_task(name=SWEEP_TASK, ignore_result=True)
def sweep() -> int:
    """The sweep, on Celery beat: the installed apps' jobs (approvals expires overdue requests),
    then runs whose worker died are re-driven."""
    with _like_a_request():
        return sweep_runs(_runner())


@worker_ready.connect
def _sweep_at_start(**kwargs: Any) -> None:
    # A worker came up: re-drive what died with the previous one without waiting for beat.
    close_old_connections()
    sweep_runs(_runner())
