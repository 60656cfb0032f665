"""Tool steps (``tool:<call id>``): run an approved call at most once, and find out — never
guess — whether a call an earlier attempt left executing ran (SPEC §5, guarantees 4 and 5)."""

from __future__ import annotations

import logging
from dataclasses import replace
from functools import partial
from typing import Any, cast

from django.db import transaction

from .. import tracing
from ..agents import Agent
from ..choices import CallStatus
from ..engine import calls, outages
from ..engine.dispatch import NextStep
from ..engine.journal import Recorded
from ..engine.leases import Lease
from ..engine.runs import block_on_doubt
from ..exceptions import Cancelled, ToolNotFound
from ..models import Run, ToolCall
from ..toolcalls import delegation
from ..tools import (
    AbortSignal,
    AlreadyDone,
    Kind,
    Refuse,
    ToolContext,
    ToolSpec,
    to_jsonable,
)
from .context import tool_context
from .records import Record

logger = logging.getLogger(__name__)


def execute(
    lease: Lease, run: Run, agent: Agent, call: ToolCall, abort: AbortSignal
) -> NextStep | Record:
    """Run the call, or find that it must not run. Returns its record, still to be made; or,
    for a tool whose effect lies outside this database, made at once: what comes next."""
    try:
        tool = _stamped(agent.get_tool(call.tool_name), call)
    except ToolNotFound as exc:
        return Record(
            partial(
                calls.finish_call, lease, call.pk, error=exc.message, expected=CallStatus.APPROVED
            )
        )
    if abort.is_set():  # the safe point before a tool is dispatched
        raise Cancelled()
    if tool.delegate:  # starts a child run: nothing runs here
        return Record(partial(delegation.start_child, lease, call, tool))
    ctx = tool_context(run, call.pk, abort, lease_token=lease.token)
    if tool.kind == "action" and tool.preflight is not None:
        match tool.preflight(ctx, call.args):
            case Refuse(reason=reason):
                return Record(partial(calls.refuse_call, lease, call.pk, reason=reason))
            case AlreadyDone(result=done):
                return Record(
                    partial(
                        calls.finish_call,
                        lease,
                        call.pk,
                        result=to_jsonable(done),
                        expected=CallStatus.APPROVED,
                    )
                )
    if tool.kind == "read":
        # Reads have no side effect: run, then record; a crash in between just runs it again.
        result, error = _invoke(tool, ctx, call.args)
        return Record(
            partial(
                calls.finish_call,
                lease,
                call.pk,
                result=result,
                error=error,
                expected=CallStatus.APPROVED,
            )
        )
    if tool.atomic:
        # The effect lives in this database: it commits with its result, or not at all.
        return Record(partial(_run_atomic, lease, tool, ctx, call))
    calls.claim_call(lease, call.pk)
    result, error = _invoke(tool, ctx, call.args)
    return calls.finish_call(lease, call.pk, result=result, error=error).next


def _stamped(tool: ToolSpec, call: ToolCall) -> ToolSpec:
    """The tool as the call was proposed: its kind is the one stamped on the call (SPEC §3), not
    what the tool says now (an MCP server's annotations, a deploy, may have changed since)."""
    return tool if tool.kind == call.kind else replace(tool, kind=cast(Kind, call.kind))


def _invoke(tool: ToolSpec, ctx: ToolContext, args: dict[str, Any]) -> tuple[Any, str | None]:
    try:
        with tracing.tool_call(tool.name, tool.kind, ctx):
            return tool(ctx, args), None
    except Exception as exc:
        if outages.database_lost(exc):  # its effect may be out: ``recover`` finds out
            raise
        logger.info("tool %s (%s) raised %r", tool.name, ctx.tool_call_id, exc)
        return None, f"{type(exc).__name__}: {exc}"


class AtomicToolRaised(Exception):
    """An atomic tool raised: the transaction it ran in is rolled back, its claim and whatever it
    wrote with it (and the opening of the next step that was to join it). ``record`` records the
    failure, in a transaction of its own."""

    def __init__(self, record: Record) -> None:
        super().__init__("an atomic tool raised")
        self.record = record


def _run_atomic(lease: Lease, tool: ToolSpec, ctx: ToolContext, call: ToolCall) -> Recorded:
    # No savepoint when nested (the opening of the next step joins it): one transaction. None
    # around the tool either (two round trips on every call): one that raises takes the whole
    # transaction down (``AtomicToolRaised``), and the caller records the failure after it.
    with transaction.atomic(savepoint=False):
        held = calls.claim_call(lease, call.pk)
        try:
            with tracing.tool_call(tool.name, tool.kind, ctx):
                result = tool(ctx, call.args)
        except Exception as exc:
            if outages.database_lost(exc):  # rolled back with its effect: it may run again
                raise
            error = f"{type(exc).__name__}: {exc}"
            raise AtomicToolRaised(Record(partial(_record_failure, lease, call.pk, error))) from exc
        return calls.finish_call(lease, call.pk, result=result, held=held)


def _record_failure(lease: Lease, call_id: str, error: str) -> Recorded:
    """The record of an atomic tool that raised, once its transaction rolled back: claimed again
    and failed, as if the tool had run in a savepoint of the claim's transaction."""
    with transaction.atomic(savepoint=False):
        held = calls.claim_call(lease, call_id)
        return calls.finish_call(lease, call_id, error=error, held=held)


def recover(lease: Lease, run: Run, agent: Agent, call: ToolCall) -> NextStep:
    """An attempt died while the call was executing: find out, never guess, whether it ran.
    Returns what comes next (a tool step: the call, or another of its step, may be runnable)."""
    if call.status == CallStatus.EXECUTING:
        calls.mark_in_doubt(lease, call.pk)
    try:
        tool: ToolSpec | None = _stamped(agent.get_tool(call.tool_name), call)
    except ToolNotFound:
        tool = None
    if tool is None:
        block_on_doubt(lease, call.pk)
        return NextStep.STOP
    if tool.recover is not None:
        try:
            found = tool.recover(tool_context(run, call.pk, lease_token=lease.token), call.args)
        except Exception as exc:
            if outages.database_lost(exc):  # not recover()'s answer: ask again later
                raise
            logger.exception("recover() of %s failed", call.pk)
            block_on_doubt(lease, call.pk)
            return NextStep.STOP
        calls.recovered(lease, call.pk, done=found.done, result=to_jsonable(found.result))
    elif tool.idempotent or tool.kind == "read":
        calls.recovered(lease, call.pk, done=False)
    else:
        block_on_doubt(lease, call.pk)
        return NextStep.STOP
    return NextStep.TOOL
