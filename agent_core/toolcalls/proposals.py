"""Recording a model step: the suspend transaction (SPEC §5, guarantee 1).

The assistant message, its tool calls with the gate's answers stamped on them, the frames that
announce them and, when the step leaves only calls waiting on people, the run's ``waiting``
status commit together, before any frame says "approval requested".
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from .. import signals
from ..choices import CallStatus, Role, RunStatus, StepStatus
from ..engine import frames, rows, sql, state, stream_log, transcript
from ..engine.dispatch import NextStep
from ..engine.frames import Frames
from ..engine.journal import Recorded, stored_call
from ..engine.leases import Lease, fenced, lock, locked
from ..engine.runs import complete_run, continue_or_park, parks
from ..engine.usage import FIELDS
from ..gate import Verdict, get_gate
from ..models import Run, ToolCall
from ..tools import args_digest
from . import independent


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
    planned: Run,
    *,
    name: str,
    text: str,
    pending_text: list[str],
    calls: list[ProposedCall],
    usage: dict[str, int],
    finish_reason: str,
    review: Callable[[ToolCall, Run], Verdict],
) -> NextStep | Recorded:
    """The suspend transaction: the assistant message, its calls with the gate's answers, the
    frames announcing them and, when the step leaves only calls waiting on people, ``waiting``.

    A step without calls is the final answer: the run completes in the same transaction.
    Returns what the run does next: ``STOP``, or the record, when the run goes on.

    ``planned``: the run as the step was planned (its ids and its thread's owner, which never
    change, build the record); the run is locked for the gate first when a call is proposed to
    it or the step parks, else by the statement that records the step.

    Opens no transaction itself: it writes in the one its record is made in
    (``runner.records``): its own, or none when it is one statement (``records_alone``).
    """
    reviewed = any(c.status == CallStatus.PROPOSED for c in calls)
    locking = not reviewed and not (calls and parks({c.status for c in calls}))
    run = planned if locking else lock(lease)
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    parts += [{"type": "tool_call", "id": c.id, "name": c.tool_name, "args": c.args} for c in calls]
    message = transcript.appended(run, Role.ASSISTANT, parts)
    message_id = message["message_id"]
    announce: Frames = [frames.text("".join(pending_text))] if pending_text else []
    call_rows = [_call_row(run, message_id, name, position, c) for position, c in enumerate(calls)]
    for row in call_rows:
        if row.status == CallStatus.PROPOSED and independent.is_independent(run, row):
            independent.propose(run, row, lambda p, r: _apply_verdict(p, review(p, r)))
        elif row.status == CallStatus.PROPOSED:
            _apply_verdict(row, review(row, run))
        state.check(ToolCall, CallStatus.PROPOSED, row.status)  # where a new call may go
    for row, proposed in zip(call_rows, calls, strict=True):
        announce += _proposal_frames(row, proposed)
    announce.append(frames.step_finish(name, usage))
    output = {"message_id": message_id, "usage": usage, "finish_reason": finish_reason}
    statuses = {row.status for row in call_rows}
    parking = bool(call_rows) and parks(statuses)
    if parking:
        state.check_statement(
            sql.RECORD_MODEL_STEP_AND_PARK, Run, RunStatus.RUNNING, RunStatus.WAITING
        )
    # The message, the calls, the journal, the usage, the frames (and parking): one statement.
    recorded = {
        **message,
        "calls": rows.json_rows(call_rows),
        "step": name,
        "step_status": StepStatus.COMPLETED.value,
        "output": json.dumps(output),
        "finished_at": timezone.now(),
        **{field: usage.get(field, 0) for field in FIELDS},
    }
    if locking:
        assert not parking
        with rows.one_statement():
            written = stream_log.emit_with(
                sql.RECORD_MODEL_STEP_LOCKING, {**recorded, **fenced(lease)}, run.pk, announce
            )
            run = locked(written)
    else:
        statement = sql.RECORD_MODEL_STEP_AND_PARK if parking else sql.RECORD_MODEL_STEP
        written = stream_log.emit_with(statement, recorded, run.pk, announce)
    assert written is not None, f"no run {run.pk}"
    # A question waits on a person too: it is asked (notified) as an approval is.
    waiting = (CallStatus.PENDING_APPROVAL, CallStatus.PENDING_INPUT)
    asked = [row for row in call_rows if row.status in waiting]
    if asked:
        get_gate().requested(asked)
    _announce_calls(call_rows)
    if not calls:
        complete_run(run)
        return NextStep.STOP
    if parking:
        return NextStep.STOP
    stored = [stored_call(call) for call in written["calls"]]
    return Recorded(continue_or_park(run, statuses), run, name, stored)


def records_alone(planned: Run, calls: list[ProposedCall]) -> bool:
    """Whether a model step's record is one statement after which a tool step comes, which
    opens without writing: no call for the gate, one approved (so none parks the run), no
    ancestor's stream to mirror the frames into. Then the record needs no transaction of its own
    (``rows.one_statement``), nor does the opening of the step after it
    (``runner.records.OneStatement``)."""
    statuses = {c.status for c in calls}
    return (
        CallStatus.APPROVED in statuses
        and CallStatus.PROPOSED not in statuses
        and planned.parent_tool_call_id is None
    )


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
    announce = [frames.tool_input_available(call)]
    match call.status:
        case CallStatus.PENDING_APPROVAL:
            announce.append(frames.approval_requested(call))
        case CallStatus.PENDING_INPUT:
            announce.append(frames.input_requested(call.id, proposed.input_schema, proposed.prompt))
        case CallStatus.APPROVED if call.decided_via == "remembered":
            announce.append(frames.approval_settled(call))
        case CallStatus.SUCCEEDED:
            announce.append(frames.tool_output(call.id, call.result))
        case CallStatus.REFUSED:
            announce.append(frames.tool_output_denied(call.id, call.reason))
        case CallStatus.FAILED:
            announce.append(frames.tool_output_error(call.id, call.error))
    return announce


def _announce_calls(rows: list[ToolCall]) -> None:
    def send() -> None:
        for row in rows:
            signals.tool_call.send(ToolCall, call=row)
            if row.status == CallStatus.PENDING_APPROVAL:
                signals.approval_requested.send(ToolCall, call=row)
            elif row.decided_via == "remembered":
                signals.approval_settled.send(ToolCall, call=row)

    transaction.on_commit(send)
