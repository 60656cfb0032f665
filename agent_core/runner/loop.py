"""The agent loop: read the journal, take the one next step, record it.

A step has two halves. ``open_step`` plans it from what the database says (never from memory),
under the run's lock, and opens it in that same transaction (a model step's journal entry and
request; parking and finishing happen right there); ``claim_step`` also takes the run's lease in
it, as a runner does for the first step it drives. ``take`` then runs the opened step, records
it, and says what kind of step comes next; ``take_and_open`` also opens that next step in the
record's transaction, for a driver that takes step after step itself (the durable runner:
only the steps of its task's queue, ``queues.queue_of``). The steps are plain
functions: ``_call_model`` (a model step, journaled ``llm:<n>``), ``_run_tool`` (``tool:<id>``),
``_recover`` (a call an earlier attempt left executing).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeAlias

import pydantic
from django.db import transaction

from .. import ids, jsonsafe, quotas, services, tracing, transcript
from ..actors import Actor
from ..agents import Agent, get_agent
from ..conf import agent_settings
from ..exceptions import (
    AgentCoreError,
    Cancelled,
    LeaseLost,
    ModelError,
    ModelNoOutput,
    ReplayDiverged,
    ToolNotFound,
)
from ..gate import get_gate
from ..models import CALL_PENDING, CallStatus, Run, RunStatus, StepStatus, ToolCall
from ..providers import get_provider
from ..providers.base import ModelRequest, ModelResponse, TextDelta, ToolCallPart
from ..services import Claim, Lease, Next, ProposedCall
from ..tools import AbortSignal, AlreadyDone, Confirm, Refuse, ToolContext, ToolSpec, to_jsonable
from .abort import CancelWatch
from .queues import queue_of
from .text import TextBuffer

logger = logging.getLogger(__name__)


class RetryLater(Exception):
    """A retryable model error: run the same step again after ``delay`` seconds."""

    def __init__(self, delay: float) -> None:
        super().__init__(f"retry in {delay:.1f}s")
        self.delay = delay


@dataclass(frozen=True)
class CallModel:
    index: int
    previous: tuple[ToolCall, ...] = ()  # the settled calls of the step before


@dataclass(frozen=True)
class RunTool:
    call: ToolCall


@dataclass(frozen=True)
class Recover:
    call: ToolCall


@dataclass(frozen=True)
class Park:
    pass


@dataclass(frozen=True)
class Finish:
    pass


Plan: TypeAlias = CallModel | RunTool | Recover | Park | Finish


@dataclass(frozen=True)
class Elsewhere:
    """The run's next step belongs on another queue: it was not opened (see ``open_step``)."""

    queue: str


@dataclass(frozen=True)
class Opened:
    """A model or tool step whose opening transaction committed: what taking it needs."""

    run: Run
    agent: Agent
    step: CallModel | RunTool | Recover
    attempt: int = 0  # model steps: the attempt the opening journaled
    request: ModelRequest | None = None  # model steps: read under the run's lock


def open_step(lease: Lease, *, only: str | None = None) -> Opened | Next | Elsewhere:
    """Plan the run's next step from the database and open it, in one transaction under the
    run's lock: a model step's journal entry and request, a park, the end.

    With ``only`` (a queue), a model or tool step that belongs on another queue is not opened:
    its queue is returned, so the durable runner can hand the run on to it. Parking and
    finishing run anywhere.
    ``STOP`` when the run parked, ended, or is no longer this lease's.
    """
    try:
        with transaction.atomic():
            return _open(lease, only)
    except Exception as exc:
        return _settle_error(lease, exc)


def claim_step(
    claim: Claim, *, only: str | None = None
) -> tuple[Lease, Opened | Next | Elsewhere] | None:
    """``open_step`` that first takes the run's lease, in that same transaction (``None``:
    another driver holds the run)."""
    lease: Lease | None = None
    try:
        with transaction.atomic():
            lease = services.acquire_lease(claim.run_id, claim.owner, passed=claim.passed)
            if lease is None:
                return None
            return lease, _open(lease, only)
    except Exception as exc:
        if lease is None:  # taking the lease failed: the task fails, the sweeper re-drives
            raise
        # The failed transaction took the claim with it: take the lease again to record the
        # failure (a bug or a broken journal must not re-drive the run forever).
        lease = services.acquire_lease(claim.run_id, claim.owner, passed=claim.passed)
        if lease is None:
            raise
        return lease, _settle_error(lease, exc)


def _open(lease: Lease, only: str | None) -> Opened | Next | Elsewhere:
    found = services.read_run(lease.run_id, lease=lease)
    if found is None:  # another driver holds the run now
        return Next.STOP
    run, journal = found
    if run.status == RunStatus.CANCELLING:  # the safe point between steps
        services.finish_cancel(lease)
        return Next.STOP
    if run.status != RunStatus.RUNNING:
        return Next.STOP
    agent = get_agent(run.agent)
    step = plan(run, journal)
    if only is not None and isinstance(step, CallModel | RunTool | Recover):
        queue = queue_of(agent, None if isinstance(step, CallModel) else step.call.tool_name)
        if queue != only:
            return Elsewhere(queue)
    match step:
        case CallModel(index, previous):
            if (over := quotas.check_step(run)) is not None:  # the safe point before the call
                services.stop_over_quota(run, limit=over.limit, detail=over.detail)
                return Next.STOP
            attempt = services.begin_model_step(run, f"llm:{index}", previous=previous)
            return Opened(run, agent, step, attempt, transcript.build_request(run, agent))
        case RunTool() | Recover():
            return Opened(run, agent, step)
        case Park():
            return services.next_step(run)
        case Finish():
            services.complete_run(run)
            return Next.STOP


def take(lease: Lease, opened: Opened, *, abort: AbortSignal | None = None) -> Next:
    """Take an opened step: call the model or run the tool, and record what came of it."""
    after = _take(lease, opened, abort, None)
    assert isinstance(after, Next), "a step recorded on its own says what comes next"
    return after


def take_and_open(
    lease: Lease, opened: Opened, *, only: str | None = None
) -> Opened | Next | Elsewhere:
    """``take``, then open the step after it in the transaction that records this one, for a
    driver that takes step after step itself (both runners): one commit fewer per step.

    The record of a tool with an effect outside this database still commits on its own.
    ``only``: as for ``open_step``.
    """
    return _take(lease, opened, None, partial(_open, lease, only))


# Opens the step after a recorded one, in the record's transaction (``take_and_open``).
Opener: TypeAlias = Callable[[], Opened | Next | Elsewhere]


@tracing.step
def _take(
    lease: Lease, opened: Opened, abort: AbortSignal | None, go_on: Opener | None
) -> Opened | Next | Elsewhere:
    run, agent = opened.run, opened.agent
    abort = abort or CancelWatch(run.pk, fresh=True)  # just read: running, not cancelling
    try:
        match opened.step:
            case CallModel(index):
                assert opened.request is not None
                return _call_model(
                    lease, run, agent, index, opened.attempt, opened.request, abort, go_on
                )
            case RunTool(call):
                return _run_tool(lease, run, agent, call, abort, go_on)
            case Recover(call):
                return _recover(lease, run, agent, call)
    except LeaseLost:
        # A cancel refuses the driver's writes: this is how a step in flight learns of it.
        if services.finish_cancel(lease):
            return Next.STOP
        raise
    except RetryLater:
        raise
    except Exception as exc:
        return _settle_error(lease, exc)


def _recorded(
    lease: Lease, go_on: Opener | None, record: Callable[[], Next]
) -> Opened | Next | Elsewhere:
    """Run a step's ``record`` transaction; with ``go_on``, open the next step in it too.

    The opening is all or nothing, and never takes the record with it: should it fail, the
    record commits and the run fails, as when a step fails to open on its own.
    """
    if go_on is None:
        return record()
    with transaction.atomic():
        after = record()
        if after == Next.STOP:
            return after
        try:
            with transaction.atomic():  # a savepoint
                return go_on()
        except Exception as exc:
            failed = exc
    return _settle_error(lease, failed)


def _settle_error(lease: Lease, exc: Exception) -> Next:
    """A step raised: a run being cancelled settles as cancelled (an aborted model call is a
    cancel, not a failure); any other run fails with the error's code."""
    if services.finish_cancel(lease):
        return Next.STOP
    if isinstance(exc, AgentCoreError):
        code, message = exc.code, exc.message
    else:
        logger.exception("run %s failed in the loop", lease.run_id, exc_info=exc)
        code, message = "run_failed", repr(exc)
    services.fail_run(lease.run_id, code=code, message=message, lease=lease)
    return Next.STOP


def plan(run: Run, journal: dict[str, str]) -> Plan:
    """The next step, read from the journal and the calls of the last model step."""
    model_steps = sorted(int(name[4:]) for name in journal if name.startswith("llm:"))
    if model_steps != list(range(len(model_steps))):
        raise ReplayDiverged(f"the journal has model steps {model_steps}; the loop takes 0, 1, …")
    if not model_steps:
        return CallModel(0)
    last = model_steps[-1]
    if journal[f"llm:{last}"] == StepStatus.STARTED:
        return CallModel(last)
    # One query for every call of the run: the last step's calls and the journal check.
    run_calls = services.run_calls(run)
    calls = [c for c in run_calls if c.step_name == f"llm:{last}"]
    _check_tool_steps(journal, run_calls, calls)
    if not calls:
        return Finish()
    for call in calls:
        if call.status in (CallStatus.EXECUTING, CallStatus.IN_DOUBT):
            return Recover(call)
    for call in calls:
        if call.status == CallStatus.APPROVED:
            return RunTool(call)
    if any(call.status in CALL_PENDING for call in calls):
        return Park()
    if last + 1 >= agent_settings().MAX_STEPS:
        raise AgentCoreError(f"the run reached MAX_STEPS ({agent_settings().MAX_STEPS})")
    return CallModel(last + 1, tuple(calls))


def _check_tool_steps(
    journal: dict[str, str], run_calls: list[ToolCall], calls: list[ToolCall]
) -> None:
    tool_steps = {name[5:] for name in journal if name.startswith("tool:")}
    if not tool_steps:
        return
    unknown = tool_steps - {call.pk for call in run_calls}
    if unknown:
        raise ReplayDiverged(f"the journal names tool steps of no call of this run: {unknown}")
    for call in calls:
        if call.pk in tool_steps and not call.is_terminal:
            raise ReplayDiverged(f"the journal says {call.pk} ran but the call is {call.status}")


def _actor(run: Run) -> Actor:
    return Actor(ref=run.actor_ref, roles=frozenset(run.actor_roles))


def _context(run: Run, call_id: str, abort: AbortSignal | None = None) -> ToolContext:
    return ToolContext(
        run_id=run.pk,
        thread_id=run.thread_id,
        tool_call_id=call_id,
        actor=_actor(run),
        idempotency_key=f"airlock-{call_id}",
        abort_signal=abort or AbortSignal(),
    )


# --- the model step ------------------------------------------------------------------------------


def _call_model(
    lease: Lease,
    run: Run,
    agent: Agent,
    index: int,
    attempt: int,
    request: ModelRequest,
    abort: AbortSignal,
    go_on: Opener | None,
) -> Opened | Next | Elsewhere:
    """The model step whose ``attempt`` and ``request`` ``open_step`` read under the run's lock;
    returns what comes next (with ``go_on``, opened)."""
    name = f"llm:{index}"
    settings = agent_settings()
    if attempt > settings.MODEL_STEP_ATTEMPTS:
        raise ModelError(f"model step {name} did not finish in {attempt - 1} attempts")
    if abort.is_set():  # the safe point before the model call
        raise Cancelled()
    response = ModelResponse()
    text = TextBuffer(lambda chunks: services.emit_text(lease, chunks))
    try:
        events = get_provider(agent.model_name).stream(request, abort=abort)
        for event in tracing.model_call(events, run.pk, model=agent.model_name, response=response):
            response.add(event)
            if isinstance(event, TextDelta):
                text.add(event.text)
    except ModelError as exc:
        if exc.retryable and attempt < settings.MODEL_STEP_ATTEMPTS:
            logger.info(
                "run %s %s attempt %d: retryable model error: %s", run.pk, name, attempt, exc
            )
            raise RetryLater(delay=0.5 * 2 ** (attempt - 1)) from exc
        raise
    if not response.text and not response.tool_calls:
        raise ModelNoOutput()
    # Calls past the cap are refused as tool errors the model sees (nothing runs, nobody is
    # asked): one reply cannot flood the inbox or the tools.
    limit = settings.MAX_TOOL_CALLS_PER_STEP
    calls = [
        _propose(run, agent, part, over_limit=i >= limit)
        for i, part in enumerate(response.tool_calls)
    ]
    gate = get_gate() if any(c.status == CallStatus.PROPOSED for c in calls) else None

    def review(row: ToolCall, locked: Run) -> Any:
        assert gate is not None
        return gate.review(
            row, tool=agent.get_tool(row.tool_name), actor=_actor(locked), thread=locked.thread
        )

    usage = response.usage.as_dict()  # the provider's own figures, as reported
    record = partial(
        services.record_model_step,
        lease,
        name=name,
        text=response.text,
        pending_text=text.take(),
        calls=calls,
        usage=usage,
        finish_reason=response.finish_reason,
        review=review,
    )
    return _recorded(lease, go_on, record)


def _propose(
    run: Run, agent: Agent, part: ToolCallPart, *, over_limit: bool = False
) -> ProposedCall:
    """Check one proposed call: unknown tools, invalid args and calls over the step's limit
    become errors, never executions."""
    call_id = ids.tool_call_id()
    raw_args = part.args if isinstance(part.args, dict) else {"_raw": part.args}
    unstorable = jsonsafe.problem([part.name, part.provider_call_id, raw_args])
    if unstorable is not None:
        # PostgreSQL cannot store it: the model is told why, and the row keeps no arguments.
        raw_args = {}
        part = ToolCallPart(
            part.provider_call_id.replace(jsonsafe.NUL, ""), part.name.replace(jsonsafe.NUL, ""), {}
        )

    def failed(kind: str, error: str) -> ProposedCall:
        return ProposedCall(
            call_id,
            part.provider_call_id,
            part.name,
            kind,
            raw_args,
            CallStatus.FAILED,
            error=error,
        )

    if unstorable is not None:
        return failed("action", f"invalid arguments: {unstorable}")
    try:
        tool = agent.get_tool(part.name)
    except ToolNotFound as exc:
        return failed("action", f"tool_not_found: {exc.message}")
    if over_limit:
        limit = agent_settings().MAX_TOOL_CALLS_PER_STEP
        return failed(
            tool.kind,
            f"too_many_tool_calls: at most {limit} tool calls are run per step; this one was "
            "not run. Call it again in a later step if it is still needed.",
        )
    if isinstance(part.args, str):
        return failed(tool.kind, "invalid arguments: not a JSON object")
    try:
        args = tool.validate_args(part.args)
    except pydantic.ValidationError as exc:
        details = json.dumps(exc.errors(include_url=False, include_context=False), default=str)
        return failed(tool.kind, f"invalid arguments: {details}")
    proposed = ProposedCall(
        call_id, part.provider_call_id, tool.name, tool.kind, args, CallStatus.PROPOSED
    )
    if tool.kind == "read":
        proposed.status = CallStatus.APPROVED
    elif tool.kind == "human":
        proposed.status = CallStatus.PENDING_INPUT
        proposed.input_schema = tool.answer_schema
        proposed.prompt = tool.prompt or str(args.get("question", ""))
    elif tool.preflight is not None:
        _apply_preflight(proposed, tool.preflight(_context(run, call_id), args))
    return proposed


def _apply_preflight(proposed: ProposedCall, check: Any) -> None:
    match check:
        case Refuse(reason=reason):
            proposed.status, proposed.reason = CallStatus.REFUSED, reason
        case AlreadyDone(result=result):
            proposed.status, proposed.result = CallStatus.SUCCEEDED, to_jsonable(result)
        case Confirm(confirmation=text):
            proposed.confirmation = text
        case None:
            pass


# --- tool steps ----------------------------------------------------------------------------------


def _invoke(tool: ToolSpec, ctx: ToolContext, args: dict[str, Any]) -> tuple[Any, str | None]:
    try:
        with tracing.tool_call(tool.name, tool.kind, ctx):
            return tool(ctx, args), None
    except Exception as exc:
        logger.info("tool %s (%s) raised %r", tool.name, ctx.tool_call_id, exc)
        return None, f"{type(exc).__name__}: {exc}"


def _run_tool(
    lease: Lease, run: Run, agent: Agent, call: ToolCall, abort: AbortSignal, go_on: Opener | None
) -> Opened | Next | Elsewhere:
    """Run an approved call and record its outcome; returns what comes next (with ``go_on``,
    opened, unless the tool's effect lies outside this database)."""
    outcome = _execute(lease, run, agent, call, abort)
    return outcome if isinstance(outcome, Next) else _recorded(lease, go_on, outcome)


def _execute(
    lease: Lease, run: Run, agent: Agent, call: ToolCall, abort: AbortSignal
) -> Next | Callable[[], Next]:
    """Run the call, or find that it must not run. Returns its record, still to be made; or,
    for a tool whose effect lies outside this database, made at once: what comes next."""
    try:
        tool = agent.get_tool(call.tool_name)
    except ToolNotFound as exc:
        return partial(
            services.finish_call, lease, call.pk, error=exc.message, expected=CallStatus.APPROVED
        )
    if abort.is_set():  # the safe point before a tool is dispatched
        raise Cancelled()
    ctx = _context(run, call.pk, abort)
    if tool.kind == "action" and tool.preflight is not None:
        match tool.preflight(ctx, call.args):
            case Refuse(reason=reason):
                return partial(services.refuse_call, lease, call.pk, reason=reason)
            case AlreadyDone(result=done):
                return partial(
                    services.finish_call,
                    lease,
                    call.pk,
                    result=to_jsonable(done),
                    expected=CallStatus.APPROVED,
                )
    if tool.kind == "read":
        # Reads have no side effect: run, then record; a crash in between just runs it again.
        result, error = _invoke(tool, ctx, call.args)
        return partial(
            services.finish_call,
            lease,
            call.pk,
            result=result,
            error=error,
            expected=CallStatus.APPROVED,
        )
    if tool.atomic:
        # The effect lives in this database: it commits with its result, or not at all.
        return partial(_run_atomic, lease, tool, ctx, call)
    services.claim_call(lease, call.pk)
    result, error = _invoke(tool, ctx, call.args)
    return services.finish_call(lease, call.pk, result=result, error=error)


def _run_atomic(lease: Lease, tool: ToolSpec, ctx: ToolContext, call: ToolCall) -> Next:
    # No savepoint when nested (the opening of the next step joins it): one transaction.
    with transaction.atomic(savepoint=False):
        held = services.claim_call(lease, call.pk)
        try:
            with transaction.atomic(), tracing.tool_call(tool.name, tool.kind, ctx):
                result, error = tool(ctx, call.args), None
        except Exception as exc:
            result, error = None, f"{type(exc).__name__}: {exc}"
        return services.finish_call(lease, call.pk, result=result, error=error, held=held)


def _recover(lease: Lease, run: Run, agent: Agent, call: ToolCall) -> Next:
    """An attempt died while the call was executing: find out, never guess, whether it ran.
    Returns what comes next (a tool step: the call, or another of its step, may be runnable)."""
    if call.status == CallStatus.EXECUTING:
        services.mark_in_doubt(lease, call.pk)
    try:
        tool: ToolSpec | None = agent.get_tool(call.tool_name)
    except ToolNotFound:
        tool = None
    if tool is None:
        services.block_on_doubt(lease, call.pk)
        return Next.STOP
    reapprove = tool.approval_scope == "attempt"
    if tool.recover is not None:
        try:
            found = tool.recover(_context(run, call.pk), call.args)
        except Exception:
            logger.exception("recover() of %s failed", call.pk)
            services.block_on_doubt(lease, call.pk)
            return Next.STOP
        services.resolve_in_doubt(
            call.pk,
            done=found.done,
            result=to_jsonable(found.result),
            reapprove=reapprove and not found.done,
            lease=lease,
        )
    elif tool.idempotent or tool.kind == "read":
        services.resolve_in_doubt(call.pk, done=False, reapprove=reapprove, lease=lease)
    else:
        services.block_on_doubt(lease, call.pk)
        return Next.STOP
    return Next.TOOL
