"""The model step (``llm:<n>``): call the model, check the calls it proposes, and hand back the
record to make (``proposals.record_model_step``: the suspend transaction)."""

from __future__ import annotations

import json
import logging
from functools import partial
from typing import Any

import pydantic

from .. import ids, tracing
from ..agents import Agent
from ..choices import CallStatus
from ..conf import agent_settings
from ..engine import jsonsafe
from ..engine.journal import emit_text
from ..engine.leases import Lease
from ..exceptions import Cancelled, ModelError, ModelNoOutput, ToolNotFound
from ..gate import get_gate
from ..models import Run, ToolCall
from ..providers.base import ModelRequest, ModelResponse, TextDelta, ToolCallPart
from ..toolcalls import delegation
from ..toolcalls.proposals import ProposedCall, record_model_step, records_alone
from ..tools import AbortSignal, AlreadyDone, Confirm, Refuse, to_jsonable
from .context import actor_of, tool_context
from .records import OneStatement, Record
from .text import TextBuffer

logger = logging.getLogger(__name__)


class RetryLater(Exception):
    """A retryable model error: run the same step again after ``delay`` seconds."""

    def __init__(self, delay: float) -> None:
        super().__init__(f"retry in {delay:.1f}s")
        self.delay = delay


def call_model(
    lease: Lease,
    run: Run,
    agent: Agent,
    index: int,
    attempt: int,
    request: ModelRequest,
    abort: AbortSignal,
) -> Record:
    """The model step whose ``attempt`` and ``request`` ``loop.open_step`` read under the run's
    lock; returns its record, still to be made: one statement when a tool step comes after it
    and nothing else needs writing (``proposals.records_alone``)."""
    name = f"llm:{index}"
    settings = agent_settings()
    if attempt > settings.MODEL_STEP_ATTEMPTS:
        raise ModelError(f"model step {name} did not finish in {attempt - 1} attempts")
    if abort.is_set():  # the safe point before the model call
        raise Cancelled()
    response = ModelResponse()
    text = TextBuffer(lambda chunks: emit_text(lease, chunks))
    try:
        events = agent.provider().stream(request, abort=abort)
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
            row, tool=agent.get_tool(row.tool_name), actor=actor_of(locked), thread=locked.thread
        )

    write = partial(
        record_model_step,
        lease,
        run,
        name=name,
        text=response.text,
        pending_text=text.take(),
        calls=calls,
        usage=response.usage.as_dict(),  # the provider's own figures, as reported
        finish_reason=response.finish_reason,
        review=review,
    )
    return OneStatement(write) if records_alone(run, calls) else Record(write)


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
    if tool.delegate and (refused := delegation.refusal(run, tool.delegate)) is not None:
        return failed(tool.kind, refused)
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
        _apply_preflight(proposed, tool.preflight(tool_context(run, call_id), args))
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
