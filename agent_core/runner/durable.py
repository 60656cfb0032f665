"""The durable runner: every model step and every tool step is a Celery task (SPEC §12).

``dispatch(run_id)`` enqueues the run's next step on ``agent.llm`` (model steps) or
``agent.tool`` (tool steps). A task takes the run's lease, heartbeats it while it takes exactly
one step, and enqueues the step after it with the lease's token, which lets that task take the
lease over without a hand-off write. Nothing lives in memory between
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
from ..celery import MODEL_QUEUE, MODEL_TASK, TOOL_QUEUE, TOOL_TASK
from ..conf import agent_settings
from ..exceptions import LeaseLost
from ..services import Lease, Next
from . import loop

logger = logging.getLogger(__name__)


def queue_of(kind: Next) -> str:
    return MODEL_QUEUE if kind == Next.MODEL else TOOL_QUEUE


def next_kind(run_id: str) -> Next:
    """Which queue the run's next step belongs on, read from the journal (a model step when the
    journal cannot say: that step will then settle the run)."""
    found = services.read_run(run_id)
    if found is None:
        return Next.MODEL
    try:
        step = loop.plan(*found)
    except Exception:
        return Next.MODEL
    return Next.MODEL if isinstance(step, loop.CallModel) else Next.TOOL


class DurableRunner:
    """Sends step tasks to the broker; ``run_step`` is what a worker does with one."""

    def __init__(self, *, owner: str | None = None) -> None:
        self.owner = owner or f"celery:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

    def dispatch(self, run_id: str, kind: Next | None = None) -> None:
        self.enqueue(run_id, kind or next_kind(run_id))

    def enqueue(
        self, run_id: str, kind: Next, *, countdown: float = 0, token: int | None = None
    ) -> None:
        from celery import current_app

        name = MODEL_TASK if kind == Next.MODEL else TOOL_TASK
        current_app.send_task(
            name,
            args=[run_id],
            kwargs={"token": token} if token is not None else {},
            queue=queue_of(kind),
            countdown=countdown or None,
        )

    def run_step(self, run_id: str, kind: Next, *, token: int | None = None) -> None:
        """Take one ``kind`` step of the run if its lease is free (or was passed on with this
        task as ``token``); then enqueue the next step, passing the lease on with it.

        The lease is taken in the transaction that opens the step (``loop.claim_step``). A run
        whose next step is of the other kind is handed to the other queue untouched.
        """
        found = loop.claim_step(services.Claim(run_id, self.owner, token), only=kind)
        if found is None:
            logger.info("%s is driven by another worker (or not runnable); backing off", run_id)
            return
        lease, opened = found
        if isinstance(opened, Next):
            after = opened
        else:
            _pause("BEFORE", kind)
            try:
                with _heartbeat(lease):
                    after = loop.take(lease, opened)
            except loop.RetryLater as retry:
                services.hand_off(lease)
                self.enqueue(run_id, kind, countdown=retry.delay)
                return
            except LeaseLost:
                logger.warning("lost the lease of %s; another driver has it", run_id)
                return
        if after == Next.STOP:  # parked or ended: the lease went with it
            return
        _pause("AFTER", kind)
        # No hand-off write: the next task takes the lease over by its token. Should that task
        # be lost, the lease expires and the sweeper re-drives the run.
        self.enqueue(run_id, after, token=lease.token)


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


def _pause(moment: str, kind: Next) -> None:
    # Lets the crash tests stop a worker between two commits, e.g. AIRLOCK_PAUSE_AFTER_LLM=30
    # (after the model step committed, before the next step is enqueued).
    delay = os.environ.get(f"AIRLOCK_PAUSE_{moment}_{kind.value.upper()}")
    if delay:
        time.sleep(float(delay))
