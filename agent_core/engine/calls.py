"""A tool call's transitions on the driver's side: claim, finish, refuse, in doubt, recovered.

Each is fenced by the driver's lease (``leases.lock``) and journals what it settles, so a
recorded tool step is never redone. Decisions made by people are ``decisions.py``.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from django.db import transaction
from django.utils import timezone

from .. import signals
from ..agents import get_agent
from ..choices import CallStatus, StepStatus
from ..exceptions import InvalidTransition, ToolNotFound
from ..gate import get_gate
from ..models import Run, Step, ToolCall
from . import frames, rows, sql, state, stream_log
from .dispatch import NextStep
from .frames import Frames
from .journal import Recorded, stored_call
from .leases import Lease, fenced, lock, locked
from .runs import OPEN, continue_or_park

logger = logging.getLogger(__name__)


def claim_call(lease: Lease, call_id: str) -> Run:
    """``approved → executing``, fenced by the lease token: the side effect may start now.

    Returns the run, locked until the caller's transaction ends (if it is in one)."""
    state.check_statement(sql.CLAIM_CALL, ToolCall, CallStatus.APPROVED, CallStatus.EXECUTING)
    params = {**fenced(lease), "call_id": call_id, "started_at": timezone.now()}
    # Joins the atomic tool's transaction; on its own, one statement needs none.
    with rows.one_statement():
        row = rows.fetch_row(sql.CLAIM_CALL, params)
        run = locked(row)
        assert row is not None
        if not row["claimed"]:
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
) -> Recorded:
    """``executing → succeeded | failed``, journaled as ``tool:<id>``; parks the run when what
    remains of the step waits on people. Returns the record: what the run does next.

    A read tool goes straight from ``approved`` (``expected``): running it again is harmless.
    ``held``: the run, when the caller's transaction already holds its lock (``claim_call``).
    """
    now = timezone.now()
    status = CallStatus.FAILED if error is not None else CallStatus.SUCCEEDED
    # The run's lock rides on the record, unless the caller holds it.
    statement = sql.FINISH_CALL_LOCKING if held is None else sql.FINISH_CALL
    state.check_statement(statement, ToolCall, expected, status)
    # No savepoint when nested (the atomic tool's transaction, or the inline driver opening the
    # next step in it): an error here ends it anyway.
    with transaction.atomic(savepoint=False):
        first = expected == CallStatus.APPROVED  # a read: this is also its only attempt
        params: dict[str, Any] = {
            **fenced(lease),
            "call_id": call_id,
            "expected": expected.value,
            "status": status.value,
            "result": None if result is None else json.dumps(result),
            "error": error or "",
            "finished_at": now,
            "attempts": int(first),
            "started_at": now if first else None,
            "fence": lease.token if first else None,
            "output": json.dumps({"status": status.value}),
            "open": OPEN,
        }
        announce = (
            frames.tool_output(call_id, result)
            if error is None
            else frames.tool_output_error(call_id, error)
        )
        # The run's lock rides on the record, unless the caller holds it. The tool has run: its
        # outcome is recorded even when a cancel arrived meanwhile.
        row = stream_log.emit_with(statement, params, lease.run_id, [announce])
        if held is None:
            run = locked(row, allow_cancelling=True)
        else:
            run = held
        assert row is not None, f"no run {lease.run_id}"
        if not row["finished"]:
            raise InvalidTransition(f"{call_id} is not {expected}")
        after = continue_or_park(run, set(row["statuses"] or ()))
        return Recorded(after, run, f"tool:{call_id}", [stored_call(row["call"])])


def refuse_call(lease: Lease, call_id: str, *, reason: str) -> NextStep:
    """``approved → refused``: the preflight right before execution said no; nothing ran.
    Returns what the run does next."""
    with transaction.atomic(savepoint=False):  # as record_model_step
        run = lock(lease)
        won = state.transition(
            ToolCall.objects.filter(pk=call_id, run=run),
            CallStatus.APPROVED,
            CallStatus.REFUSED,
            reason=reason,
            finished_at=timezone.now(),
        )
        if not won:
            raise InvalidTransition(f"{call_id} is not approved")
        stream_log.emit(run.pk, [frames.tool_output_denied(call_id, reason)])
        return continue_or_park(run)


def mark_in_doubt(lease: Lease, call_id: str) -> None:
    """``executing → in_doubt``: an attempt died mid-effect; nobody knows whether it happened."""
    with transaction.atomic():
        run = lock(lease)
        won = state.transition(
            ToolCall.objects.filter(pk=call_id, run=run),
            CallStatus.EXECUTING,
            CallStatus.IN_DOUBT,
        )
        if won:
            stream_log.emit(run.pk, [frames.tool_in_doubt(call_id)])
            call = ToolCall.objects.get(pk=call_id)
            transaction.on_commit(lambda: signals.call_in_doubt.send(ToolCall, call=call))


def recovered(lease: Lease, call_id: str, *, done: bool, result: Any = None) -> bool:
    """The tool's ``recover()`` (or its being idempotent) settled an in-doubt call for the
    driver: see ``resolve``."""
    with transaction.atomic():
        run = lock(lease)
        return resolve(run, ToolCall.objects.get(pk=call_id), done=done, result=result)


def resolve(run: Run, call: ToolCall, *, done: bool, result: Any = None) -> bool:
    """Settle an in-doubt call under its run's lock: ``done`` records ``result`` without running
    anything; not done makes it runnable again (``approved``, or ``pending_approval`` when its
    tool asks afresh for every attempt: ``asks_again``). ``False``: it was no longer in doubt."""
    now = timezone.now()
    announce: Frames
    reapprove = not done and asks_again(run, call)
    if done:
        fields: dict[str, Any] = {"result": result, "finished_at": now}
        target = CallStatus.SUCCEEDED
        announce = [frames.tool_output(call.pk, result)]
    elif reapprove:
        fields = {"decided_by_ref": "", "decided_at": None, "decided_via": ""}
        fields.update(expires_at=None, requested_at=now)
        target = CallStatus.PENDING_APPROVAL
        call.status, call.expires_at = CallStatus.PENDING_APPROVAL, None
        announce = [frames.approval_requested(call)]
    else:
        fields, target, announce = {}, CallStatus.APPROVED, []
    calls = ToolCall.objects.filter(pk=call.pk)
    if not state.transition(calls, CallStatus.IN_DOUBT, target, **fields):
        return False
    for key, value in {**fields, "status": target}.items():
        setattr(call, key, value)  # the call as the decision left it
    if done:
        Step.objects.update_or_create(
            run=run,
            name=f"tool:{call.pk}",
            defaults={"status": StepStatus.COMPLETED, "output": {"status": "succeeded"}},
        )
    stream_log.emit(run.pk, announce)
    if reapprove:
        get_gate().requested([call])
        transaction.on_commit(lambda: signals.approval_requested.send(ToolCall, call=call))
    return True


def asks_again(run: Run, call: ToolCall) -> bool:
    """Whether a new attempt of ``call`` needs a fresh approval (SPEC §5, 5): its tool's
    ``approval_scope`` is ``"attempt"``. A tool that is gone asks nobody; re-run, it fails."""
    try:
        return get_agent(run.agent).get_tool(call.tool_name).approval_scope == "attempt"
    except ToolNotFound:
        return False
