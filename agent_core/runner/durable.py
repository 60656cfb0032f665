"""The durable runner: Celery tasks drive runs, a chain of steps per task (SPEC §12).

``dispatch(run_id)`` enqueues a task on the queue of the run's next step (``queues.queue_of``).
The task takes the run's lease in the transaction that opens that step, heartbeats it, and takes
step after step the way the inline runner does (``loop.take_and_open``: each step's record
opens the next in its transaction, so every step is committed before the next one starts),
until the next step belongs on another queue, the run parks or ends, or the task's slice
(``CHAIN_MAX_STEPS`` steps, ``CHAIN_MAX_SECONDS``) is spent. It then enqueues the next task with
the lease's token, which lets that task take the lease over without a hand-off write. Nothing
lives in memory between tasks: a waiting run holds no worker, a redelivered or duplicate task
finds the lease held and backs off, and a run whose worker died is re-driven by the sweeper
once its lease expires.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from dataclasses import dataclass

from django.dispatch import Signal

from .. import signals
from ..agents import get_agent
from ..celery import STEP_TASK
from ..conf import agent_settings
from ..engine.dispatch import NextStep
from ..engine.journal import read_run
from ..engine.leases import Claim, Lease, hand_off
from ..exceptions import LeaseLost
from . import heartbeat, loop
from .model_step import RetryLater
from .plan import CallModel, Recover, RunTool, plan
from .queues import queue_of

logger = logging.getLogger(__name__)


def next_queue(run_id: str) -> str:
    """The queue of the run's next step, read from the journal (the model queue when the
    journal cannot say: that step will then settle the run)."""
    model_queue = agent_settings().MODEL_QUEUE
    found = read_run(run_id)
    if found is None:
        return model_queue
    run, journal, every_call = found
    try:
        step = plan(journal, every_call)
        agent = get_agent(run.agent)
    except Exception:
        return model_queue
    if isinstance(step, RunTool | Recover):
        return queue_of(agent, step.call.tool_name)
    return model_queue


@dataclass(frozen=True)
class _Onward:
    """Where a task sends the run when it stops driving it; ``token``: the lease passed on
    (``None``: let go of first)."""

    queue: str
    token: int | None
    countdown: float = 0


class _Slice:
    """The steps one task may still take before it hands the run on (fairness)."""

    def __init__(self) -> None:
        settings = agent_settings()
        self.taken = 0
        self.limit = settings.CHAIN_MAX_STEPS
        self.deadline = time.monotonic() + settings.CHAIN_MAX_SECONDS

    def spent(self) -> bool:
        return self.taken >= self.limit or time.monotonic() >= self.deadline

    def count(self) -> bool:
        """Count a step about to be taken; ``True`` when it is the slice's last."""
        self.taken += 1
        return self.spent()


class DurableRunner:
    """Sends step tasks to the broker; ``drive`` is what a worker does with one."""

    def __init__(self, *, owner: str | None = None) -> None:
        self.owner = owner or f"celery:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

    def dispatch(self, run_id: str, kind: NextStep | None = None) -> None:
        # A model step's queue is known; a tool step's depends on which tool: read the plan.
        queue = agent_settings().MODEL_QUEUE if kind == NextStep.MODEL else next_queue(run_id)
        self.enqueue(run_id, queue)

    def enqueue(
        self, run_id: str, queue: str, *, countdown: float = 0, token: int | None = None
    ) -> None:
        from celery import current_app

        current_app.send_task(
            STEP_TASK,
            args=[run_id, queue],
            kwargs={"token": token} if token is not None else {},
            queue=queue,
            countdown=countdown or None,
        )

    def drive(self, run_id: str, queue: str, *, token: int | None = None) -> None:
        """Take the run's steps that belong on ``queue``, one after another, if its lease is
        free (or was passed on with this task as ``token``); then hand the run on."""
        found = loop.claim_step(Claim(run_id, self.owner, token), only=queue)
        if found is None:
            logger.info("%s is driven by another worker (or not runnable); backing off", run_id)
            return
        lease, opening = found
        if isinstance(opening, loop.Opened):  # before the heartbeat: a stall the lease outlives
            _announce(signals.step_ready, opening)
        with heartbeat.holding(lease):
            onward = self._take_steps(lease, queue, opening)
        if onward is None:
            return
        if onward.token is None:
            hand_off(lease)
        # Otherwise no hand-off write: the next task takes the lease over by its token. Should
        # that task be lost, the lease expires and the sweeper re-drives the run.
        self.enqueue(run_id, onward.queue, countdown=onward.countdown, token=onward.token)

    def _take_steps(self, lease: Lease, queue: str, opening: loop.Opening) -> _Onward | None:
        """Take steps until the run leaves this task; returns where it goes next (``None``:
        it parked or ended, or the lease is lost)."""
        budget = _Slice()
        while True:
            match opening:
                case loop.Opened() as opened:
                    if budget.taken:
                        _announce(signals.step_ready, opened)
                    last = budget.count()
                    try:  # the slice's last step opens nothing: the next task opens its own
                        opening = (
                            loop.take(lease, opened)
                            if last
                            else loop.take_and_open(lease, opened, only=queue)
                        )
                    except RetryLater as retry:
                        return _Onward(queue, None, retry.delay)
                    except LeaseLost:
                        logger.warning("lost the lease of %s; another driver has it", lease.run_id)
                        return None
                    if opening != NextStep.STOP:
                        _announce(signals.step_recorded, opened)
                case NextStep.STOP:  # parked or ended: the lease went with it
                    return None
                case loop.OtherQueue(other):
                    return _Onward(other, lease.token)
                case NextStep() if budget.spent():  # a step recorded on its own opened nothing
                    model = agent_settings().MODEL_QUEUE
                    return _Onward(model if opening == NextStep.MODEL else queue, lease.token)
                case NextStep():
                    opening = loop.open_step(lease, only=queue)


def _announce(signal: Signal, step: loop.Opened) -> None:
    # Between two commits: where instrumentation hooks in, and where the crash tests' workers
    # stop (tests/durable/faults.py) to be killed at a precise moment.
    kind = NextStep.MODEL if isinstance(step.step, CallModel) else NextStep.TOOL
    signal.send(DurableRunner, run_id=step.run.pk, kind=kind)
