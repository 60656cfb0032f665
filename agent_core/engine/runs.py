"""A run's life: start, park, resume, complete, fail (cancel: ``cancel.py``).

Run-level decisions (park, resume, end) are taken under the run's row lock: the driver's, under
its lease (``leases.lock``), or an outside writer's (``leases.lock_run``). Every status write goes
through ``state.transition``, and the frames announcing it are written in its transaction.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.utils import timezone

from .. import signals
from ..actors import Actor
from ..agents import get_agent
from ..choices import CALL_PENDING, CallStatus, QueuedStatus, Role, RunStatus
from ..conf import agent_settings
from ..exceptions import AgentNotFound, NotFound, RunActive
from ..models import QueuedMessage, Run, Thread, ToolCall
from . import dispatch, frames, journal, rows, sql, state, stream_log, transcript
from .dispatch import NextStep
from .frames import Frames
from .leases import Lease, deadline, lock, lock_run

logger = logging.getLogger(__name__)

# Calls that keep a run waiting: on a person, or (``executing`` between steps) on a child run.
BLOCKING = frozenset({*CALL_PENDING, CallStatus.IN_DOUBT, CallStatus.EXECUTING})
# Calls still open once a step's calls are recorded: approved (to run) or blocking.
OPEN = sorted({CallStatus.APPROVED.value, *BLOCKING})


def start_run(
    *,
    agent: str,
    message: str,
    actor: Actor,
    thread_id: str | None = None,
    parent: Run | None = None,
    parent_tool_call_id: str | None = None,
) -> Run:
    """Start a turn: the user's message, a queued run holding the thread; dispatched on commit.

    A child run (``parent``, SPEC §14) gets a thread of its own, owned by the parent's
    requester; ``parent_tool_call_id``: the call that waits for its answer (none: detached).
    """
    get_agent(agent)
    run = Run(
        agent=agent,
        actor_ref=actor.ref,
        actor_roles=sorted(actor.roles),
        runner=agent_settings().RUNNER,
        lease_expires_at=deadline(),
        parent_run=parent,
        parent_tool_call_id=parent_tool_call_id,
    )
    said = [{"type": "text", "text": message}]
    if thread_id is None:
        # A new thread is born held by its run (the foreign keys are checked at commit): the
        # thread, the run and the message in one statement.
        owner = parent.thread.owner_ref if parent is not None else actor.ref
        run.thread = Thread(owner_ref=owner, agent=agent, title=message[:80], active_run_id=run.pk)
        born = {"thread": rows.json_rows([run.thread]), "run": rows.json_rows([run])}
        with rows.one_statement():
            rows.fetch_row(sql.START_RUN, {**born, **transcript.appended(run, Role.USER, said)})
    else:
        with transaction.atomic():
            _start_on(run, thread_id, said)
    # After the commit (at once after an autocommitted statement): announced, then driven.
    transaction.on_commit(lambda: signals.run_started.send(Run, run=run))
    dispatch.on_commit(run.id, NextStep.MODEL)
    return run


def _start_on(run: Run, thread_id: str, said: list[dict[str, Any]]) -> None:
    """``start_run`` on an existing thread: the run, the thread's claim and the message."""
    thread = Thread.objects.filter(pk=thread_id).first()
    if thread is None:
        raise NotFound(f"no thread {thread_id}")
    run.thread = thread
    run.save(force_insert=True)
    claimed = Thread.objects.filter(pk=thread.pk, active_run__isnull=True).update(
        active_run=run, updated_at=timezone.now()
    )
    if not claimed:
        raise RunActive()
    transcript.append(run, Role.USER, said)


def end_run(
    run: Run, status: RunStatus, *, code: str = "", message: str = "", ended: Frames | None = None
) -> bool:
    """Settle the run as ``status`` (from a status the table allows) and release its thread;
    ``ended`` go out before ``finish``. ``False``: the run had already left those statuses."""
    ends = sql.END_RUN_AND_FINISH
    sources = state.check_statement(ends, Run, state.sources_of(Run, status), status)
    finish = frames.finish(status.value, code)
    params = {
        "run_id": run.pk,
        "thread_id": run.thread_id,
        "sources": sources,
        "status": status.value,
        "error_code": code,
        "error_message": message,
        "finished_at": timezone.now(),
    }
    # The common end, with nothing queued on the thread: the run, its thread and its frames in
    # one statement.
    if stream_log.emit_with(ends, params, run.pk, [*(ended or []), finish]) is None:
        state.check_statement(sql.END_RUN, Run, sources, status)
        row = rows.fetch_row(sql.END_RUN, params)
        assert row is not None
        if not row["ended"]:
            return False
        # The thread's next queued turn starts in this transaction: exactly once, even on a crash.
        next_turn = _start_next_turn(run) if row["released"] and row["queued"] else []
        stream_log.emit(run.pk, [*(ended or []), *next_turn, finish])
    run.status, run.error_code, run.error_message = status, code, message
    if run.parent_tool_call_id is not None:
        _answer_parent(run)
    return True


def _answer_parent(child: Run) -> None:
    """In the transaction that ended a child run (SPEC §14): its outcome settles the delegation
    call that waits for it, and the parent resumes if nothing else blocks it — both or neither,
    so a crash can neither strand the parent nor resume it twice. A parent that has ended (its
    call cancelled or failed with it) is left as it is."""
    assert child.parent_run_id is not None and child.parent_tool_call_id is not None
    parent = lock_run(child.parent_run_id)  # a child's lock before its parent's, always
    now = timezone.now()
    about = f"The {child.agent} agent's run {child.pk}"
    if child.status == RunStatus.COMPLETED:
        last = child.messages.filter(role=Role.ASSISTANT).order_by("-seq").first()
        answer = last.text if last is not None else ""
        fields: dict[str, Any] = {"result": answer}
        target, announce = (
            CallStatus.SUCCEEDED,
            frames.tool_output(child.parent_tool_call_id, answer),
        )
    else:
        said = "was cancelled" if child.status == RunStatus.CANCELLED else "failed"
        detail = f" ({child.error_code}: {child.error_message})" if child.error_code else ""
        fields = {"error": f"{about} {said}{detail}."}
        target = CallStatus.FAILED
        announce = frames.tool_output_error(child.parent_tool_call_id, fields["error"])
    calls = ToolCall.objects.filter(pk=child.parent_tool_call_id)
    if not state.transition(calls, CallStatus.EXECUTING, target, finished_at=now, **fields):
        return
    journal.record_tool_step(parent, child.parent_tool_call_id, target.value)
    stream_log.emit(parent.pk, [announce])
    resume_if_unblocked(parent)


def _start_next_turn(run: Run) -> Frames:
    """In the transaction that ended ``run`` and released its thread: start the thread's next
    queued message. Returns the frame announcing it in the ending run's stream."""
    while True:
        queued = QueuedMessage.objects.waiting(run.thread_id).select_for_update().first()
        if queued is None:
            return []
        actor = Actor(ref=queued.actor_ref, roles=frozenset(queued.actor_roles))
        try:
            next_run = start_run(
                agent=queued.agent, message=queued.text, actor=actor, thread_id=run.thread_id
            )
        except AgentNotFound:  # its agent was removed since: it can never start
            QueuedMessage.objects.filter(pk=queued.pk).update(status=QueuedStatus.WITHDRAWN)
            continue
        QueuedMessage.objects.filter(pk=queued.pk).update(
            status=QueuedStatus.STARTED, run=next_run, started_at=timezone.now()
        )
        return [frames.next_turn(queued.pk, next_run.pk)]


def complete_run(run: Run, *, ended: Frames | None = None) -> None:
    """``running → completed``; releases the thread. The caller holds the run's lock."""
    if end_run(run, RunStatus.COMPLETED, ended=ended):
        transaction.on_commit(lambda: signals.run_finished.send(Run, run=run))


def stop_over_quota(run: Run, *, limit: str, detail: str) -> None:
    """At a safe point before a model step: the actor's token budget is spent, the run ends as
    failed with ``quota_exceeded``. The caller holds the run's lock; no call of it is open."""
    report_unreported_calls(run)
    ended = [frames.quota_exceeded(limit, detail)]
    if end_run(run, RunStatus.FAILED, code="quota_exceeded", message=detail, ended=ended):
        logger.warning("run %s stopped: quota %s exceeded (%s)", run.pk, limit, detail)
        transaction.on_commit(
            lambda: signals.quota_exceeded.send(Run, run=run, actor_ref=run.actor_ref, reason=limit)
        )
        transaction.on_commit(lambda: signals.run_failed.send(Run, run=run))


def fail_run(run_id: str, *, code: str, message: str, lease: Lease | None = None) -> bool:
    """Settle a run as failed: its open calls fail, the model is told, the thread is released."""
    with transaction.atomic():
        run = lock(lease) if lease else lock_run(run_id)
        if run.is_terminal:
            return False
        calls = ToolCall.objects.filter(run=run)
        # A delegation's child is cancelled with its dead parent (the sweeper's ``orphans``).
        state.transition(
            calls.filter(child_runs__isnull=False),
            CallStatus.EXECUTING,
            CallStatus.FAILED,
            error=f"{transcript.NEVER_COMPLETED} (run failed: {code})",
            finished_at=timezone.now(),
        )
        state.transition(calls, CallStatus.EXECUTING, CallStatus.IN_DOUBT)
        state.transition(
            calls,
            [CallStatus.APPROVED, *CALL_PENDING],
            CallStatus.FAILED,
            error=f"{transcript.NEVER_COMPLETED} (run failed: {code})",
            finished_at=timezone.now(),
        )
        report_unreported_calls(run)
        end_run(run, RunStatus.FAILED, code=code, message=message)
    logger.warning("run %s failed: %s %s", run_id, code, message)
    transaction.on_commit(lambda: signals.run_failed.send(Run, run=run))
    return True


def report_unreported_calls(run: Run) -> None:
    """Give the transcript a result for every call of the run's last model step, if not yet."""
    last_assistant = run.messages.filter(role=Role.ASSISTANT).order_by("-seq").first()
    if last_assistant is None:
        return
    if run.messages.filter(role=Role.TOOL, seq__gt=last_assistant.seq).exists():
        return
    transcript.append_results(run, list(last_assistant.tool_calls.order_by("position")))


def open_calls(run: Run) -> set[str]:
    """The statuses of the run's calls that are approved or wait on a person."""
    return set(
        ToolCall.objects.filter(run=run, status__in=OPEN)
        .order_by()
        .values_list("status", flat=True)
    )


def continue_or_park(run: Run, statuses: set[str] | None = None) -> NextStep:
    """Once a step's calls are recorded or settled (``statuses``: those of the run's calls that
    may still be open, read when not given): run an approved one (``TOOL``), park the run on one
    that waits on a person (``STOP``: the run is ``waiting`` now), or call the model again
    (``MODEL``). The caller holds the run's lock."""
    if statuses is None:
        statuses = open_calls(run)
    if parks(statuses):
        _park(run)
        return NextStep.STOP
    return NextStep.TOOL if CallStatus.APPROVED in statuses else NextStep.MODEL


def parks(statuses: set[str]) -> bool:
    """Whether a run whose open calls have ``statuses`` waits: none to run, one blocking."""
    return CallStatus.APPROVED not in statuses and bool(statuses & BLOCKING)


def _park(run: Run, **fields: str) -> None:
    """``running → waiting``: the run holds no worker while it waits (``resume_if_unblocked``)."""
    state.transition_one(
        Run,
        run.pk,
        RunStatus.RUNNING,
        RunStatus.WAITING,
        lease_owner="",
        lease_expires_at=None,
        **fields,
    )


def block_on_doubt(lease: Lease, call_id: str) -> None:
    """Stop the run on an in-doubt call nothing can resolve: a person must say what happened."""
    with transaction.atomic():
        run = lock(lease)
        _park(
            run,
            error_code="side_effect_retry_blocked",
            error_message=f"{call_id} may or may not have run; mark it done or not done",
        )


def resume_if_unblocked(run: Run, statuses: set[str] | None = None) -> bool:
    """``waiting → queued`` once no call waits on a person; dispatched after commit.

    The caller holds the run's lock, taken before it settled the call. ``statuses``: what
    ``open_calls`` would answer, when the caller read it with its own write (read if not given).
    """
    if run.status != RunStatus.WAITING:
        return False
    if statuses is None:
        statuses = open_calls(run)
    if statuses & BLOCKING:
        return False
    state.transition_one(
        Run,
        run.pk,
        RunStatus.WAITING,
        RunStatus.QUEUED,
        lease_expires_at=deadline(),
        **dict.fromkeys(sql.FREED_CLEARS, ""),
    )
    resumed(run, statuses)
    return True


def resumed(run: Run, statuses: set[str]) -> None:
    """Dispatch, after commit, a run this transaction moved ``waiting → queued`` (here, or in a
    decision's own statement: ``sql.SETTLE_CALL``), given the statuses of its open calls."""
    dispatch.on_commit(run.pk, continue_or_park(run, statuses))  # nothing blocks: tool or model
