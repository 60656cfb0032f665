"""The durable runner: every model step and every tool step is a Celery task (SPEC §12).

``dispatch(run_id)`` enqueues the run's next step on ``agent.llm`` (model steps) or
``agent.tool`` (tool steps). A task takes the run's lease, heartbeats it while it takes exactly
one step, hands the lease off and enqueues the step after it. Nothing lives in memory between
steps: a waiting run holds no worker, and a run whose worker died is re-driven by the sweeper once
its lease expires.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection

from .. import services
from ..conf import agent_settings
from ..exceptions import LeaseLost
from ..models import RunStatus
from ..services import Lease
from . import loop

logger = logging.getLogger(__name__)

MODEL_QUEUE = "agent.llm"
TOOL_QUEUE = "agent.tool"
MODEL_TASK = "agent_core.model_step"
TOOL_TASK = "agent_core.tool_step"
SWEEP_TASK = "agent_core.sweep"


def queue_of(kind: loop.Next) -> str:
    return MODEL_QUEUE if kind == loop.Next.MODEL else TOOL_QUEUE


def next_kind(run_id: str) -> loop.Next:
    """Which queue the run's next step belongs on, read from the journal (a model step when the
    journal cannot say: that step will then settle the run)."""
    found = loop.load(run_id)
    if found is None:
        return loop.Next.MODEL
    try:
        step = loop.plan(*found)
    except Exception:
        return loop.Next.MODEL
    return loop.Next.MODEL if isinstance(step, loop.CallModel) else loop.Next.TOOL


class DurableRunner:
    """Sends step tasks to the broker; ``run_step`` is what a worker does with one."""

    def __init__(self, *, owner: str | None = None) -> None:
        self.owner = owner or f"celery:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

    def dispatch(self, run_id: str) -> None:
        self.enqueue(run_id, next_kind(run_id))

    def enqueue(self, run_id: str, kind: loop.Next, *, countdown: float = 0) -> None:
        from celery import current_app

        name = MODEL_TASK if kind == loop.Next.MODEL else TOOL_TASK
        current_app.send_task(
            name, args=[run_id], queue=queue_of(kind), countdown=countdown or None
        )

    def run_step(self, run_id: str, kind: loop.Next) -> None:
        """Take one ``kind`` step of the run if its lease is free; then enqueue the next step.

        A run whose next step is of the other kind is handed to the other queue untouched.
        """
        lease = services.acquire_lease(run_id, self.owner)
        if lease is None:
            logger.info("%s is driven by another worker (or not runnable); backing off", run_id)
            return
        _pause("BEFORE", kind)
        try:
            with _heartbeat(lease):
                after = loop.advance(lease, only=kind)
        except loop.RetryLater as retry:
            services.hand_off(lease)
            self.enqueue(run_id, kind, countdown=retry.delay)
            return
        except LeaseLost:
            logger.warning("lost the lease of %s; another driver has it", run_id)
            return
        if after == loop.Next.STOP:  # parked or ended: the lease went with it
            return
        # Fenced by token and owner: a no-op when the run parked, ended or changed hands, and it
        # lets go of a run that left ``running`` under this step (e.g. being cancelled). The
        # same statement says which queue the next step belongs on (a hint: that step plans
        # afresh from the journal, and hands itself to the other queue if the hint was wrong).
        after = after_hand_off(after, services.hand_off_and_look(lease))
        if after != loop.Next.STOP:
            _pause("AFTER", kind)
            self.enqueue(run_id, after)


def after_hand_off(after: loop.Next, found: tuple[str, bool] | None) -> loop.Next:
    """The next step's kind from ``advance``'s answer and the run as the hand-off found it."""
    if after == loop.Next.STOP or found is None or found[0] != RunStatus.RUNNING:
        return loop.Next.STOP
    if after != loop.Next.ANY:  # no step taken: the next one is of the other kind
        return after
    return loop.Next.TOOL if found[1] else loop.Next.MODEL


@contextmanager
def _heartbeat(lease: Lease) -> Iterator[None]:
    """Renew ``lease`` from a side thread while the step runs, so a long step keeps its run."""
    stop = threading.Event()
    period = max(agent_settings().LEASE_SECONDS / 3, 0.2)

    def beat() -> None:
        try:
            while not stop.wait(period):
                if services.renew_leases([lease]):
                    logger.warning("lease of %s was taken over", lease.run_id)
                    return
        except Exception:
            logger.exception("heartbeat of %s failed", lease.run_id)
        finally:
            connection.close()

    thread = threading.Thread(target=beat, name=f"airlock-heartbeat-{lease.run_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _pause(moment: str, kind: loop.Next) -> None:
    # Lets the crash tests stop a worker between two commits, e.g. AIRLOCK_PAUSE_AFTER_LLM=30
    # (after the model step committed, before the next step is enqueued).
    delay = os.environ.get(f"AIRLOCK_PAUSE_{moment}_{kind.value.upper()}")
    if delay:
        time.sleep(float(delay))
