"""Turns sent while the agent works (``mode`` of ``POST /agent/chat``): reject, queue, interrupt.

A queued message waits in its thread's server-side queue. The transaction that ends the thread's
active run (completed, failed or cancelled) starts the next queued message's run
(``runs.end_run``), so a crash can neither lose it nor start it twice; the ending run's stream
announces it with a ``next-turn`` frame. A message is queued under its thread's run's lock,
which that end holds from its transaction's start, so the end sees it or it sees the thread idle
and starts at once. ``interrupt`` queues the message ahead of the others
and cancels the active run: at its next safe point, or at once when no driver holds it (a parked
run).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from django.db import transaction

from .. import quotas
from ..actors import Actor
from ..agents import get_agent
from ..choices import QueuedStatus
from ..conf import agent_settings
from ..engine.cancel import request_cancel
from ..engine.leases import lock_run
from ..engine.runs import start_run
from ..exceptions import NotFound, QueueFull, RunActive, TurnStarted
from ..models import QueuedMessage, Run, Thread

_ATTEMPTS = 3  # a message whose thread's run changed meanwhile looks again


class Mode(StrEnum):
    """What a message does when its thread is busy."""

    REJECT = "reject"  # 409 run_active
    QUEUE = "queue"  # wait for the active run to end
    INTERRUPT = "interrupt"  # cancel the active run, then start


@dataclass(frozen=True)
class Queued:
    """A message that waits for its thread: ``position`` 1 starts next."""

    message: QueuedMessage
    position: int


def start_turn(
    *,
    agent: str,
    message: str,
    actor: Actor,
    thread_id: str | None = None,
    mode: Mode = Mode.REJECT,
) -> Run | Queued:
    """Start a turn now, or (thread busy) refuse it, queue it, or interrupt the active run."""
    get_agent(agent)
    for _ in range(_ATTEMPTS):
        outcome = _start_once(agent, message, actor, thread_id, mode)
        if outcome is not None:
            return outcome
    raise RunActive("the thread's run kept changing; try again")


@transaction.atomic
def _start_once(
    agent: str, message: str, actor: Actor, thread_id: str | None, mode: Mode
) -> Run | Queued | None:
    if thread_id is None:
        quotas.check_start(actor, agent, starts_now=True)
        return start_run(agent=agent, message=message, actor=actor)
    found = Thread.objects.filter(pk=thread_id).values_list("active_run_id", flat=True)
    if not found:
        raise NotFound(f"no thread {thread_id}")
    target = found[0]
    if mode != Mode.REJECT and target is not None:
        # A run before its thread, the order a run's end takes them: the end (whose statement
        # checks the queue with its own snapshot) then runs wholly before or after this message.
        lock_run(target)
    thread = Thread.objects.select_for_update().get(pk=thread_id)
    if thread.active_run_id is None:
        quotas.check_start(actor, agent, starts_now=True)
        return start_run(agent=agent, message=message, actor=actor, thread_id=thread_id)
    if mode == Mode.REJECT:
        raise RunActive()
    if thread.active_run_id != target:
        return None  # the thread's run is not the one locked (it changed meanwhile): look again
    check_queue(thread)
    quotas.check_start(actor, agent, starts_now=False)
    queued = QueuedMessage.objects.create(
        thread=thread,
        agent=agent,
        text=message,
        actor_ref=actor.ref,
        actor_roles=sorted(actor.roles),
        interrupt=mode == Mode.INTERRUPT,
    )
    if mode == Mode.INTERRUPT:
        assert target is not None
        request_cancel(target, actor=actor)
        queued.refresh_from_db()
        if queued.run_id is not None:  # the run was parked: settled, and this turn started
            return Run.objects.get(pk=queued.run_id)
    return Queued(queued, position_of(queued))


def check_queue(thread: Thread) -> None:
    """Refuse a message to a thread whose queue is full (its lock, held here, orders them)."""
    limit = agent_settings().MAX_QUEUED_TURNS
    if QueuedMessage.objects.waiting(thread.pk).count() >= limit:
        raise QueueFull(
            f"this thread already has {limit} queued messages: wait for one to start",
            retry_after=quotas.CONCURRENT_RETRY_SECONDS,
        )


def position_of(queued: QueuedMessage) -> int:
    """1 for the message that starts next."""
    order = list(QueuedMessage.objects.waiting(queued.thread_id).values_list("pk", flat=True))
    return order.index(queued.pk) + 1 if queued.pk in order else 0


def withdraw(thread_id: str, message_id: str) -> None:
    """Take a queued message off its thread's queue; refused once it has started."""
    won = QueuedMessage.objects.filter(
        pk=message_id, thread_id=thread_id, status=QueuedStatus.QUEUED
    ).update(status=QueuedStatus.WITHDRAWN)
    if not won:
        if QueuedMessage.objects.filter(pk=message_id, thread_id=thread_id).exists():
            raise TurnStarted()
        raise NotFound(f"no queued message {message_id}")
