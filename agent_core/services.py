"""The only code that changes a Run's or a ToolCall's status.

Every transition is a compare-and-set ``UPDATE … WHERE status = <expected>`` inside a transaction
(the row count says who won), and writes the stream frames that announce it in that transaction.
Writes made on behalf of a driver are fenced by its lease token: a worker that lost its lease
cannot commit over the one that holds it now. Run-level decisions (park, resume) are taken under
the run's row lock, so a decision and a driver going to sleep can never miss each other.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Any

from django.db import connection, transaction
from django.db.models import F, Q, Subquery
from django.utils import timezone

from . import signals, streams, transcript, turns
from . import usage as usage_totals
from .actors import Actor
from .agents import get_agent
from .conf import agent_settings
from .exceptions import InvalidTransition, LeaseLost, NotFound, RunActive
from .gate import Verdict
from .models import (
    CALL_PENDING,
    RUN_ACTIVE,
    CallStatus,
    Role,
    Run,
    RunStatus,
    Step,
    StepStatus,
    StreamFrame,
    Thread,
    ToolCall,
)
from .streams import Frames
from .tools import args_digest

logger = logging.getLogger(__name__)


class Next(StrEnum):
    """What a step's transaction left the run to do: a model step, a tool step, or nothing (it
    parked or ended). It routes the durable runner's next task; that task plans afresh from the
    journal, so a wrong answer costs a hop to the other queue, never a wrong step."""

    MODEL = "llm"
    TOOL = "tool"
    STOP = "stop"


@dataclass(frozen=True)
class Lease:
    """A driver's hold on a run: ``token`` grows with every acquisition and fences every write."""

    run_id: str
    token: int
    owner: str


@dataclass(frozen=True)
class Claim:
    """A driver's request for a run's lease, taken in the transaction that opens its step;
    ``passed``: the token the previous step's driver handed on with the task."""

    run_id: str
    owner: str
    passed: int | None = None


def _lease_deadline() -> Any:
    return timezone.now() + timedelta(seconds=agent_settings().LEASE_SECONDS)


def _after_commit(fn: Callable[[], object]) -> None:
    transaction.on_commit(fn)


def _dispatch_on_commit(run_id: str, kind: Next) -> None:
    from .runner import get_runner  # the runner imports services

    _after_commit(lambda: get_runner().dispatch(run_id, kind))


# --- runs ----------------------------------------------------------------------------------------


@transaction.atomic
def start_run(*, agent: str, message: str, actor: Actor, thread_id: str | None = None) -> Run:
    """Start a turn: the user's message, a queued run holding the thread; dispatched on commit."""
    get_agent(agent)
    run = Run(
        agent=agent,
        actor_ref=actor.ref,
        actor_roles=sorted(actor.roles),
        runner=agent_settings().RUNNER,
        lease_expires_at=_lease_deadline(),
    )
    if thread_id is None:
        # A new thread is born held by its run (the foreign keys are checked at commit).
        run.thread = Thread.objects.create(
            owner_ref=actor.ref, agent=agent, title=message[:80], active_run_id=run.pk
        )
        run.save(force_insert=True)
    else:
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
    transcript.append(run, Role.USER, [{"type": "text", "text": message}])
    _after_commit(lambda: signals.run_started.send(Run, run=run))
    _dispatch_on_commit(run.id, Next.MODEL)
    return run


def acquire_lease(run_id: str, owner: str, *, passed: int | None = None) -> Lease | None:
    """Take the run's lease if nobody holds a live one; ``None`` means another driver has it.

    ``passed``: the token of the lease the previous step's driver passed on with the task (it
    wrote nothing more after enqueueing it); still current, it is taken over at once.
    """
    # One compare-and-set. It waits for the row lock rather than skipping it (a decision holds it
    # only for a moment, and giving up would strand a run that decision just queued), then
    # re-checks its conditions against the row as the lock holder left it.
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Run._meta.db_table} SET status = %s, lease_owner = %s,"
            " lease_token = lease_token + 1, lease_expires_at = %s"
            " WHERE id = %s AND status IN (%s, %s)"
            " AND (lease_owner = '' OR lease_expires_at < %s OR lease_token = %s)"
            " RETURNING lease_token",
            [
                RunStatus.RUNNING.value,
                owner,
                _lease_deadline(),
                run_id,
                RunStatus.QUEUED.value,
                RunStatus.RUNNING.value,
                timezone.now(),
                passed,
            ],
        )
        row = cursor.fetchone()
    return None if row is None else Lease(run_id, row[0], owner)


def renew_leases(leases: Iterable[Lease]) -> list[Lease]:
    """Heartbeat: push the deadline of each lease still held; return the ones that were lost."""
    lost = []
    deadline = _lease_deadline()
    for lease in leases:
        renewed = Run.objects.filter(
            pk=lease.run_id, lease_token=lease.token, lease_owner=lease.owner
        ).update(lease_expires_at=deadline)
        if not renewed:
            lost.append(lease)
    return lost


def hand_off(lease: Lease) -> None:
    """Let go of the lease between steps; the next step's driver may be another worker."""
    Run.objects.filter(pk=lease.run_id, lease_token=lease.token, lease_owner=lease.owner).update(
        lease_owner="", lease_expires_at=_lease_deadline()
    )


# Raw SQL for the reads every step starts with: the ORM's compile costs more than the query.
_FENCED = "AND lease_token = %s AND lease_owner = %s"
_LOCK = f"SELECT * FROM {Run._meta.db_table} WHERE id = %s {_FENCED} FOR UPDATE"
_READ = (
    f"SELECT *, ARRAY(SELECT s.name || ' ' || s.status FROM {Step._meta.db_table} s"
    f" WHERE s.run_id = r.id) AS journal FROM {Run._meta.db_table} r WHERE r.id = %s"
)
_CALLS = f"SELECT * FROM {ToolCall._meta.db_table} WHERE run_id = %s ORDER BY position"


def read_run(run_id: str, *, lease: Lease | None = None) -> tuple[Run, dict[str, str]] | None:
    """The run and its journal (step name → status), in one query.

    With ``lease``: the run's row locked, or ``None`` when the lease no longer holds it.
    """
    if lease is None:
        runs = Run.objects.raw(_READ, [run_id])
    else:
        fenced = [run_id, lease.token, lease.owner]
        runs = Run.objects.raw(f"{_READ} {_FENCED} FOR UPDATE OF r", fenced)
    run = next(iter(runs), None)
    if run is None:
        return None
    pairs = (entry.rsplit(" ", 1) for entry in run.journal)  # type: ignore[attr-defined]
    return run, {name: status for name, status in pairs}


def run_calls(run: Run) -> list[ToolCall]:
    """Every call of the run, in the order its steps proposed them (what a plan reads)."""
    return list(ToolCall.objects.raw(_CALLS, [run.pk]))


def lock(lease: Lease, *, allow_cancelling: bool = False) -> Run:
    """The run's row, locked, if ``lease`` still holds it; raises ``LeaseLost`` otherwise.

    A run being cancelled refuses its driver's writes (that is how a driver learns of the cancel
    mid-step) except, with ``allow_cancelling``, the record of a tool that already ran.
    """
    run = next(iter(Run.objects.raw(_LOCK, [lease.run_id, lease.token, lease.owner])), None)
    allowed = {RunStatus.RUNNING, RunStatus.CANCELLING} if allow_cancelling else {RunStatus.RUNNING}
    if run is None or run.status not in allowed:
        raise LeaseLost()
    return run


def lock_run(run_id: str) -> Run:
    """The run's row, locked, for a decision made outside any driver."""
    return Run.objects.select_for_update().get(pk=run_id)


def lock_call(call_id: str) -> tuple[Run, ToolCall] | None:
    """A call and its run, the run's row locked first (as every decision takes them), the call
    read under that lock; ``None`` when there is no such call."""
    run_of_call = ToolCall.objects.filter(pk=call_id).values("run_id")
    run = Run.objects.select_for_update().filter(pk=Subquery(run_of_call)).first()
    if run is None:
        return None
    return run, ToolCall.objects.get(pk=call_id)


def _end_run(
    run: Run,
    status: RunStatus,
    *,
    code: str = "",
    message: str = "",
    frames: Frames | None = None,
) -> bool:
    """Settle the run as ``status`` and release its thread; ``frames`` go out before ``finish``."""
    won = Run.objects.filter(pk=run.pk, status__in=RUN_ACTIVE).update(
        status=status,
        error_code=code,
        error_message=message,
        finished_at=timezone.now(),
        lease_owner="",
        lease_expires_at=None,
    )
    if not won:
        return False
    released = Thread.objects.filter(pk=run.thread_id, active_run=run.pk).update(active_run=None)
    run.status, run.error_code, run.error_message = status, code, message
    frame: dict[str, Any] = {"status": status.value}
    if code:
        frame["error_code"] = code
    # The thread's next queued turn starts in this transaction: exactly once, even on a crash.
    next_turn = turns.start_next(run) if released else []
    streams.emit(run.pk, [*(frames or []), *next_turn, ("finish", frame)])
    return True


def stop_over_quota(run: Run, *, limit: str, detail: str) -> None:
    """At a safe point before a model step: the actor's token budget is spent, the run ends as
    failed with ``quota_exceeded``. The caller holds the run's lock; no call of it is open."""
    _report_unreported_calls(run)
    frames: Frames = [("quota-exceeded", {"limit": limit, "detail": detail})]
    if _end_run(run, RunStatus.FAILED, code="quota_exceeded", message=detail, frames=frames):
        logger.warning("run %s stopped: quota %s exceeded (%s)", run.pk, limit, detail)
        _after_commit(
            lambda: signals.quota_exceeded.send(Run, run=run, actor_ref=run.actor_ref, reason=limit)
        )
        _after_commit(lambda: signals.run_failed.send(Run, run=run))


def complete_run(run: Run, *, frames: Frames | None = None) -> None:
    """``running → completed``; releases the thread. The caller holds the run's lock."""
    if _end_run(run, RunStatus.COMPLETED, frames=frames):
        _after_commit(lambda: signals.run_finished.send(Run, run=run))


def fail_run(run_id: str, *, code: str, message: str, lease: Lease | None = None) -> bool:
    """Settle a run as failed: its open calls fail, the model is told, the thread is released."""
    with transaction.atomic():
        run = lock(lease) if lease else lock_run(run_id)
        if run.is_terminal:
            return False
        ToolCall.objects.filter(run=run, status=CallStatus.EXECUTING).update(
            status=CallStatus.IN_DOUBT
        )
        ToolCall.objects.filter(
            run=run,
            status__in=[CallStatus.PROPOSED, CallStatus.APPROVED, *CALL_PENDING],
        ).update(
            status=CallStatus.FAILED,
            error=f"{transcript.NEVER_COMPLETED} (run failed: {code})",
            finished_at=timezone.now(),
        )
        _report_unreported_calls(run)
        _end_run(run, RunStatus.FAILED, code=code, message=message)
    logger.warning("run %s failed: %s %s", run_id, code, message)
    _after_commit(lambda: signals.run_failed.send(Run, run=run))
    return True


def _report_unreported_calls(run: Run) -> None:
    """Give the transcript a result for every call of the run's last model step, if not yet."""
    last_assistant = run.messages.filter(role=Role.ASSISTANT).order_by("-seq").first()
    if last_assistant is None:
        return
    if run.messages.filter(role=Role.TOOL, seq__gt=last_assistant.seq).exists():
        return
    transcript.append_results(run, list(last_assistant.tool_calls.order_by("position")))


# Calls that keep a run waiting on a person.
_BLOCKING = frozenset({*CALL_PENDING, CallStatus.IN_DOUBT})


def _park(run: Run) -> None:
    """``running → waiting``: a call waits on a person; the run holds no worker while it waits.

    The caller holds the run's lock (see ``resume_if_unblocked``).
    """
    Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(
        status=RunStatus.WAITING, lease_owner="", lease_expires_at=None
    )


def block_on_doubt(lease: Lease, call_id: str) -> None:
    """Stop the run on an in-doubt call nothing can resolve: a person must say what happened."""
    with transaction.atomic():
        run = lock(lease)
        Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(
            status=RunStatus.WAITING,
            error_code="side_effect_retry_blocked",
            error_message=f"{call_id} may or may not have run; mark it done or not done",
            lease_owner="",
            lease_expires_at=None,
        )


def resume_if_unblocked(run: Run) -> bool:
    """``waiting → queued`` once no call waits on a person; dispatched after commit.

    The caller holds the run's lock, taken before it settled the call.
    """
    if run.status != RunStatus.WAITING:
        return False
    open_calls = _open_calls(run)
    if open_calls & _BLOCKING:
        return False
    Run.objects.filter(pk=run.pk, status=RunStatus.WAITING).update(
        status=RunStatus.QUEUED,
        error_code="",
        error_message="",
        lease_owner="",
        lease_expires_at=_lease_deadline(),
    )
    _dispatch_on_commit(run.pk, _next_after(run, open_calls))  # nothing blocks: tool or model
    return True


# --- model steps ---------------------------------------------------------------------------------


_BEGIN_STEP = (
    f"INSERT INTO {Step._meta.db_table} AS s (run_id, name, status, attempts, started_at)"
    " VALUES (%s, %s, %s, 1, %s)"
    " ON CONFLICT (run_id, name) DO UPDATE SET attempts = s.attempts + 1 RETURNING s.attempts"
)


def begin_model_step(run: Run, name: str, *, previous: Iterable[ToolCall] = ()) -> int:
    """Journal the start of a model step and return its attempt number (1 on the first try).

    On the first attempt, the results of ``previous`` (the calls of the step before, every one
    settled) join the transcript. A retried attempt marks the text its cut-short predecessor
    streamed as superseded. The caller holds the run's lock under its lease (``loop.open_step``).
    """
    assert connection.in_atomic_block, "a step opens in the transaction that locked its run"
    with connection.cursor() as cursor:
        cursor.execute(_BEGIN_STEP, [run.pk, name, StepStatus.STARTED.value, timezone.now()])
        row = cursor.fetchone()
    assert row is not None
    attempts = int(row[0])
    if attempts == 1:
        transcript.append_results(run, list(previous))
    else:
        _supersede_partial_text(run, name)
    streams.emit(run.pk, [("step-start", {"step": name, "attempt": attempts})])
    return attempts


def _supersede_partial_text(run: Run, step_name: str) -> None:
    last_start = (
        StreamFrame.objects.filter(run=run, kind="step-start", data__step=step_name)
        .order_by("-seq")
        .values_list("seq", flat=True)
        .first()
    )
    if last_start is not None:
        StreamFrame.objects.filter(run=run, kind="text", seq__gt=last_start).update(superseded=True)


def emit_text(lease: Lease, chunks: list[str]) -> None:
    """Stream coalesced text of the model step in flight, fenced by the lease."""
    with transaction.atomic():
        lock(lease)
        streams.emit(lease.run_id, [("text", {"text": "".join(chunks)})])


@dataclass
class ProposedCall:
    """A tool call read from a model response, checked by the loop before it is recorded.

    ``status`` is ``proposed`` for an action the gate must review, ``approved`` for a read,
    ``pending_input`` for a human tool, or already settled (``failed``, ``refused``,
    ``succeeded``) when validation or preflight decided it.
    """

    id: str
    provider_call_id: str
    tool_name: str
    kind: str
    args: dict[str, Any]
    status: CallStatus
    error: str = ""
    reason: str = ""
    confirmation: str = ""
    result: Any = None
    input_schema: dict[str, Any] | None = None
    prompt: str = ""


def record_model_step(
    lease: Lease,
    *,
    name: str,
    text: str,
    pending_text: list[str],
    calls: list[ProposedCall],
    usage: dict[str, int],
    finish_reason: str,
    review: Callable[[ToolCall, Run], Verdict],
) -> Next:
    """The suspend transaction: the assistant message, its calls with the gate's answers, the
    frames announcing them and, when the step leaves only calls waiting on people, ``waiting``.

    A step without calls is the final answer: the run completes in the same transaction.
    Returns what the run does next.
    """
    # No savepoint when nested (the inline driver opens the next step in it): one transaction.
    with transaction.atomic(savepoint=False):
        run = lock(lease)
        parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        parts += [
            {"type": "tool_call", "id": c.id, "name": c.tool_name, "args": c.args} for c in calls
        ]
        message = transcript.append(run, Role.ASSISTANT, parts)
        frames: Frames = [("text", {"text": "".join(pending_text)})] if pending_text else []
        rows = [_call_row(run, message.pk, name, position, c) for position, c in enumerate(calls)]
        for row in rows:
            if row.status == CallStatus.PROPOSED:
                _apply_verdict(row, review(row, run))
        ToolCall.objects.bulk_create(rows)
        for row, proposed in zip(rows, calls, strict=True):
            frames += _proposal_frames(row, proposed)
        frames.append(("step-finish", {"step": name, "usage": usage}))
        Step.objects.filter(run=run, name=name).update(
            status=StepStatus.COMPLETED,
            output={"message_id": message.pk, "usage": usage, "finish_reason": finish_reason},
            finished_at=timezone.now(),
            **usage,
        )
        usage_totals.add_to_run(run, usage)
        _announce_calls(rows)
        if not calls:
            complete_run(run, frames=frames)
            return Next.STOP
        streams.emit(run.pk, frames)
        return _next_after(run, {row.status for row in rows})


def _apply_verdict(row: ToolCall, verdict: Verdict) -> None:
    """Stamp the gate's answer on a call being proposed; it is never re-derived later."""
    row.requires_approval = verdict.required
    if verdict.refused:
        row.status, row.reason, row.finished_at = (
            CallStatus.REFUSED,
            verdict.refused,
            timezone.now(),
        )
    elif not verdict.required:
        row.status, row.decided_via = CallStatus.APPROVED, "policy"
    elif verdict.remembered_by_ref:
        row.status, row.decided_via, row.remember = CallStatus.APPROVED, "remembered", True
        row.decided_by_ref, row.decided_at = verdict.remembered_by_ref, timezone.now()
        row.approver = verdict.approver
    else:
        row.status, row.approver = CallStatus.PENDING_APPROVAL, verdict.approver
        row.expires_at = verdict.expires_at


def _call_row(run: Run, message_id: str, step: str, position: int, c: ProposedCall) -> ToolCall:
    settled = c.status in (CallStatus.FAILED, CallStatus.REFUSED, CallStatus.SUCCEEDED)
    return ToolCall(
        id=c.id,
        run=run,
        thread_id=run.thread_id,
        message_id=message_id,
        step_name=step,
        position=position,
        provider_call_id=c.provider_call_id,
        tool_name=c.tool_name,
        kind=c.kind,
        args=c.args,
        args_digest=args_digest(c.tool_name, c.args),
        status=c.status,
        requester_ref=run.thread.owner_ref,
        error=c.error,
        reason=c.reason,
        confirmation=c.confirmation,
        result=c.result,
        finished_at=timezone.now() if settled else None,
    )


def _proposal_frames(call: ToolCall, proposed: ProposedCall) -> Frames:
    frames: Frames = [
        (
            "tool-input-available",
            {
                "tool_call_id": call.id,
                "tool_name": call.tool_name,
                "tool_kind": call.kind,
                "input": call.args,
            },
        )
    ]
    match call.status:
        case CallStatus.PENDING_APPROVAL:
            frames.append(("approval-requested", _approval_requested(call)))
        case CallStatus.PENDING_INPUT:
            frames.append(
                (
                    "input-requested",
                    {
                        "tool_call_id": call.id,
                        "schema": proposed.input_schema,
                        "prompt": proposed.prompt,
                    },
                )
            )
        case CallStatus.APPROVED if call.decided_via == "remembered":
            frames.append(("approval-settled", _approval_settled(call)))
        case CallStatus.SUCCEEDED:
            frames.append(("tool-output", {"tool_call_id": call.id, "output": call.result}))
        case CallStatus.REFUSED:
            frames.append(("tool-output-denied", {"tool_call_id": call.id, "reason": call.reason}))
        case CallStatus.FAILED:
            frames.append(("tool-output-error", {"tool_call_id": call.id, "error": call.error}))
    return frames


def _approval_requested(call: ToolCall) -> dict[str, Any]:
    return {
        "tool_call_id": call.id,
        "approver": call.approver,
        "expires_at": call.expires_at.isoformat() if call.expires_at else None,
        "confirmation": call.confirmation,
    }


def _approval_settled(call: ToolCall) -> dict[str, Any]:
    return {
        "tool_call_id": call.id,
        "status": call.status,
        "decided_by": call.decided_by_ref,
        "decided_via": call.decided_via,
        "remember": call.remember,
        "reason": call.reason,
    }


def _announce_calls(rows: list[ToolCall]) -> None:
    def send() -> None:
        for row in rows:
            signals.tool_call.send(ToolCall, call=row)
            if row.status == CallStatus.PENDING_APPROVAL:
                signals.approval_requested.send(ToolCall, call=row)
            elif row.decided_via == "remembered":
                signals.approval_settled.send(ToolCall, call=row)

    _after_commit(send)


# --- tool calls ----------------------------------------------------------------------------------


def claim_call(lease: Lease, call_id: str) -> Run:
    """``approved → executing``, fenced by the lease token: the side effect may start now.

    Returns the run, locked until the caller's transaction ends."""
    # No savepoint when nested (the atomic tool's transaction): an error here ends it anyway.
    with transaction.atomic(savepoint=False):
        run = lock(lease)
        won = ToolCall.objects.filter(
            pk=call_id, run_id=lease.run_id, status=CallStatus.APPROVED
        ).update(
            status=CallStatus.EXECUTING,
            fence=lease.token,
            attempts=F("attempts") + 1,
            started_at=timezone.now(),
        )
        if not won:
            raise InvalidTransition(f"{call_id} is not approved")
        return run


def finish_call(
    lease: Lease,
    call_id: str,
    *,
    result: Any = None,
    error: str | None = None,
    expected: CallStatus = CallStatus.EXECUTING,
    held: Run | None = None,
) -> Next:
    """``executing → succeeded | failed``, journaled as ``tool:<id>``; parks the run when what
    remains of the step waits on people. Returns what the run does next.

    A read tool goes straight from ``approved`` (``expected``): running it again is harmless.
    ``held``: the run, when the caller's transaction already holds its lock (``claim_call``).
    """
    now = timezone.now()
    status = CallStatus.FAILED if error is not None else CallStatus.SUCCEEDED
    # No savepoint when nested (the atomic tool's transaction, or the inline driver opening the
    # next step in it): an error here ends it anyway.
    with transaction.atomic(savepoint=False):
        # The tool has run: its outcome is recorded even when a cancel arrived meanwhile.
        run = held or lock(lease, allow_cancelling=True)
        extra: dict[str, Any] = {}
        if expected == CallStatus.APPROVED:
            extra = {"attempts": F("attempts") + 1, "started_at": now, "fence": lease.token}
        won = ToolCall.objects.filter(pk=call_id, run=run, status=expected).update(
            status=status, result=result, error=error or "", finished_at=now, **extra
        )
        if not won:
            raise InvalidTransition(f"{call_id} is not {expected}")
        Step.objects.create(
            run=run,
            name=f"tool:{call_id}",
            status=StepStatus.COMPLETED,
            output={"status": status.value},
            finished_at=now,
        )
        if error is None:
            frame = ("tool-output", {"tool_call_id": call_id, "output": result})
        else:
            frame = ("tool-output-error", {"tool_call_id": call_id, "error": error})
        streams.emit(run.pk, [frame])
        return next_step(run)


def next_step(run: Run) -> Next:
    """What the run does once a call of its step settled: run an approved call, park on one
    that waits on a person, or call the model again. The caller holds the run's lock."""
    return _next_after(run, _open_calls(run))


def _open_calls(run: Run) -> set[str]:
    """The statuses of the run's calls that are approved or wait on a person."""
    return set(
        ToolCall.objects.filter(run=run, status__in=[CallStatus.APPROVED, *_BLOCKING])
        .order_by()
        .values_list("status", flat=True)
    )


def _next_after(run: Run, statuses: set[str]) -> Next:
    """Once a step's calls are recorded or settled (``statuses``: those of the run's calls that
    may still be open): run an approved one, park on one that waits on a person, or call the
    model again."""
    if CallStatus.APPROVED in statuses:
        return Next.TOOL
    if statuses & _BLOCKING:
        _park(run)
        return Next.STOP
    return Next.MODEL


def mark_in_doubt(lease: Lease, call_id: str) -> None:
    """``executing → in_doubt``: an attempt died mid-effect; nobody knows whether it happened."""
    with transaction.atomic():
        run = lock(lease)
        won = ToolCall.objects.filter(pk=call_id, run=run, status=CallStatus.EXECUTING).update(
            status=CallStatus.IN_DOUBT
        )
        if won:
            streams.emit(run.pk, [("tool-in-doubt", {"tool_call_id": call_id})])
            call = ToolCall.objects.get(pk=call_id)
            _after_commit(lambda: signals.call_in_doubt.send(ToolCall, call=call))


def resolve_in_doubt(
    call_id: str,
    *,
    done: bool,
    result: Any = None,
    reapprove: bool = False,
    decided_by_ref: str = "",
    lease: Lease | None = None,
) -> bool:
    """Settle an in-doubt call: ``done`` records ``result`` without running anything; not done
    makes it runnable again (``approved``, or ``pending_approval`` when its tool asks afresh for
    every attempt). Called by the driver (``recover()``) or by a person (mark done / not done).
    """
    with transaction.atomic():
        call = ToolCall.objects.filter(pk=call_id).first()
        if call is None:
            raise NotFound(f"no tool call {call_id}")
        run = lock(lease) if lease else lock_run(call.run_id)
        now = timezone.now()
        frames: Frames
        if done:
            fields: dict[str, Any] = {
                "status": CallStatus.SUCCEEDED,
                "result": result,
                "finished_at": now,
            }
            frames = [("tool-output", {"tool_call_id": call_id, "output": result})]
        elif reapprove:
            fields = {
                "status": CallStatus.PENDING_APPROVAL,
                "decided_by_ref": "",
                "decided_at": None,
            }
            fields.update(decided_via="", expires_at=None, requested_at=now)
            call.status, call.expires_at = CallStatus.PENDING_APPROVAL, None
            frames = [("approval-requested", _approval_requested(call))]
        else:
            fields, frames = {"status": CallStatus.APPROVED}, []
        won = ToolCall.objects.filter(pk=call_id, status=CallStatus.IN_DOUBT).update(**fields)
        if not won:
            return False
        if done:
            Step.objects.update_or_create(
                run=run,
                name=f"tool:{call_id}",
                defaults={"status": StepStatus.COMPLETED, "output": {"status": "succeeded"}},
            )
        streams.emit(run.pk, frames)
        if reapprove and not done:
            _after_commit(lambda: signals.approval_requested.send(ToolCall, call=call))
        if lease is None:
            logger.info(
                "%s resolved as %s by %s", call_id, "done" if done else "not done", decided_by_ref
            )
            resume_if_unblocked(run)
        return True


def settle_approval(
    run: Run,
    call: ToolCall,
    *,
    status: CallStatus,
    decided_by_ref: str,
    decided_via: str,
    reason: str = "",
    remember: bool = False,
    args: dict[str, Any] | None = None,
) -> bool:
    """``pending_approval → approved | rejected | expired | cancelled``; resumes the run when it
    was the last call waiting. The caller holds the run's lock (``lock_run``)."""
    now = timezone.now()
    fields: dict[str, Any] = {
        "status": status,
        "decided_by_ref": decided_by_ref,
        "decided_via": decided_via,
        "decided_at": now,
        "reason": reason,
        "remember": remember,
    }
    if args is not None and args != call.args:
        fields.update(
            args=args, original_args=call.args, args_digest=args_digest(call.tool_name, args)
        )
    if status != CallStatus.APPROVED:
        fields["finished_at"] = now
    won = ToolCall.objects.filter(pk=call.pk, status=CallStatus.PENDING_APPROVAL).update(**fields)
    if not won:
        return False
    for key, value in fields.items():
        setattr(call, key, value)
    frames: Frames = [("approval-settled", _approval_settled(call))]
    if status != CallStatus.APPROVED:
        denied = "approval expired" if status == CallStatus.EXPIRED else reason or status.value
        frames.append(("tool-output-denied", {"tool_call_id": call.pk, "reason": denied}))
    streams.emit(run.pk, frames)
    _after_commit(lambda: signals.approval_settled.send(ToolCall, call=call))
    resume_if_unblocked(run)
    return True


def answer_input(run: Run, call: ToolCall, *, answer: Any, decided_by_ref: str, via: str) -> bool:
    """``pending_input → succeeded`` with the person's answer as the result; resumes the run."""
    now = timezone.now()
    won = ToolCall.objects.filter(pk=call.pk, status=CallStatus.PENDING_INPUT).update(
        status=CallStatus.SUCCEEDED,
        result=answer,
        decided_by_ref=decided_by_ref,
        decided_via=via,
        decided_at=now,
        finished_at=now,
    )
    if not won:
        return False
    Step.objects.create(
        run=run,
        name=f"tool:{call.pk}",
        status=StepStatus.COMPLETED,
        output={"status": "succeeded"},
        finished_at=now,
    )
    streams.emit(run.pk, [("tool-output", {"tool_call_id": call.pk, "output": answer})])
    resume_if_unblocked(run)
    return True


def refuse_call(lease: Lease, call_id: str, *, reason: str) -> Next:
    """``approved → refused``: the preflight right before execution said no; nothing ran.
    Returns what the run does next."""
    with transaction.atomic(savepoint=False):  # as record_model_step
        run = lock(lease)
        won = ToolCall.objects.filter(pk=call_id, run=run, status=CallStatus.APPROVED).update(
            status=CallStatus.REFUSED, reason=reason, finished_at=timezone.now()
        )
        if not won:
            raise InvalidTransition(f"{call_id} is not approved")
        streams.emit(run.pk, [("tool-output-denied", {"tool_call_id": call_id, "reason": reason})])
        return next_step(run)


def extend_approval(run: Run, call: ToolCall, *, expires_at: Any) -> bool:
    """Move a pending request's deadline to ``expires_at`` (later only); announced on the
    stream as ``approval-extended``. The caller holds the run's lock (``lock_run``)."""
    won = ToolCall.objects.filter(
        pk=call.pk, status=CallStatus.PENDING_APPROVAL, expires_at__lt=expires_at
    ).update(expires_at=expires_at)
    if not won:
        return False
    call.expires_at = expires_at
    streams.emit(
        run.pk,
        [("approval-extended", {"tool_call_id": call.pk, "expires_at": expires_at.isoformat()})],
    )
    return True


# --- cancel (guarantee 11) -----------------------------------------------------------------------


def request_cancel(run_id: str, *, actor_ref: str) -> Run:
    """Cancel a run: settled at once when no driver holds it, else ``cancelling`` until its
    driver reaches a safe point. Children are cancelled too. A finished run is left as it is."""
    with transaction.atomic():
        run = lock_run(run_id)
        if run.is_terminal or run.status == RunStatus.CANCELLING:
            return run
        driven = (
            run.status == RunStatus.RUNNING
            and run.lease_owner != ""
            and run.lease_expires_at is not None
            and run.lease_expires_at > timezone.now()
        )
        if driven:
            Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(
                status=RunStatus.CANCELLING, cancel_requested=True
            )
            run.status, run.cancel_requested = RunStatus.CANCELLING, True
            logger.info("run %s: cancel requested by %s", run.pk, actor_ref)
        else:
            Run.objects.filter(pk=run.pk).update(cancel_requested=True)
            _settle_cancel(run, actor_ref=actor_ref)
        for child_id in Run.objects.filter(parent_run=run, status__in=RUN_ACTIVE).values_list(
            "pk", flat=True
        ):
            request_cancel(child_id, actor_ref=actor_ref)
        return run


def finish_cancel(lease: Lease) -> bool:
    """The driver reached a safe point of a run being cancelled: settle it; ``False`` when the
    run is not being cancelled (or this lease no longer holds it)."""
    with transaction.atomic():
        run = (
            Run.objects.select_for_update()
            .select_related("thread")
            .filter(
                pk=lease.run_id,
                lease_token=lease.token,
                lease_owner=lease.owner,
                status=RunStatus.CANCELLING,
            )
            .first()
        )
        if run is None:
            return False
        _settle_cancel(run, actor_ref="")
        return True


def settle_abandoned_cancels(limit: int = 100) -> int:
    """Sweeper: runs left ``cancelling`` by a driver that died are settled once its lease ends."""
    settled = 0
    stale = Run.objects.filter(status=RunStatus.CANCELLING).filter(
        Q(lease_expires_at__lt=timezone.now()) | Q(lease_expires_at__isnull=True)
    )
    for run_id in stale.values_list("pk", flat=True)[:limit]:
        with transaction.atomic():
            run = lock_run(run_id)
            if run.status == RunStatus.CANCELLING:
                _settle_cancel(run, actor_ref="")
                settled += 1
    return settled


def _announce_settled(call: ToolCall) -> Callable[[], object]:
    return lambda: signals.approval_settled.send(ToolCall, call=call)


def _settle_cancel(run: Run, *, actor_ref: str) -> None:
    """Under the run's lock: every open call is cancelled (nothing of it ran), the transcript
    gets a result for each, the stream ends with ``cancelled`` then ``finish``."""
    now = timezone.now()
    frames: Frames = []
    for call in ToolCall.objects.filter(
        run=run, status__in=[CallStatus.PROPOSED, CallStatus.APPROVED, *CALL_PENDING]
    ).order_by("requested_at", "position"):
        was_pending_approval = call.status == CallStatus.PENDING_APPROVAL
        won = ToolCall.objects.filter(pk=call.pk, status=call.status).update(
            status=CallStatus.CANCELLED,
            decided_by_ref=actor_ref or call.decided_by_ref,
            decided_via="cancel" if was_pending_approval else call.decided_via,
            decided_at=now if was_pending_approval else call.decided_at,
            reason="run cancelled",
            finished_at=now,
        )
        if not won:
            continue
        call.refresh_from_db()
        if was_pending_approval:
            frames.append(("approval-settled", _approval_settled(call)))
            _after_commit(_announce_settled(call))
        frames.append(("tool-output-denied", {"tool_call_id": call.pk, "reason": "run cancelled"}))
    # A call caught mid-execution may or may not have happened: a person must say (guarantee 5).
    ToolCall.objects.filter(run=run, status=CallStatus.EXECUTING).update(status=CallStatus.IN_DOUBT)
    _report_unreported_calls(run)
    frames.append(("cancelled", {}))
    streams.emit(run.pk, frames)
    message = f"cancelled by {actor_ref}" if actor_ref else "cancelled"
    if _end_run(run, RunStatus.CANCELLED, code="cancelled", message=message):
        _after_commit(lambda: signals.run_cancelled.send(Run, run=run))
