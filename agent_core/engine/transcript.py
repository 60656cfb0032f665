"""The thread's transcript: appending messages and reading it back as a model request."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from django.utils import timezone

from .. import ids
from ..agents import Agent, describe
from ..choices import CallStatus, Role, ToolKind
from ..models import Run, ToolCall
from ..providers.base import ModelMessage, ModelRequest, ToolDefinition
from . import outcomes, rows, sql

NEVER_COMPLETED = "This call never completed: its run ended first. Check before doing it again."


def append(run: Run, role: Role, content: list[dict[str, Any]]) -> str:
    """Append a message to the run's thread; returns its id. The caller holds the run's lock."""
    params = appended(run, role, content)
    # One statement: the next number of the thread and the message that takes it.
    rows.fetch_row(sql.APPEND_MESSAGE, params)
    message_id: str = params["message_id"]
    return message_id


def appended(run: Run, role: Role, content: list[dict[str, Any]]) -> dict[str, Any]:
    """The parameters of ``sql.APPEND_MESSAGE`` appending a message to the run's thread."""
    return {
        "message_id": ids.message_id(),
        "thread_id": run.thread_id,
        "run_id": run.pk,
        "role": role.value,
        "content": json.dumps(content),
        "message_at": timezone.now(),
    }


def result_part(call: ToolCall) -> dict[str, Any]:
    """What the model is told about a settled call (or one its run left unsettled)."""
    output: Any
    is_error = True
    match call.status:
        case CallStatus.SUCCEEDED:
            output, is_error = call.result, False
            if call.original_args is not None:
                output = {"result": call.result, "note": f"ran with edited arguments {call.args}"}
        case CallStatus.FAILED:
            output = call.error or NEVER_COMPLETED
        case CallStatus.REJECTED if call.kind == ToolKind.HUMAN:
            defaults = "" if call.result is None else f" Assume the defaults: {call.result}."
            output = f"The user skipped this question without answering.{defaults}"
        case CallStatus.REJECTED:
            reason = f": {call.reason}" if call.reason else ""
            output = f"The user rejected this call{reason}. The tool did not run."
        case CallStatus.EXPIRED:
            output = "The approval request expired before anyone decided. The tool did not run."
        case CallStatus.CANCELLED:
            output = "The run was cancelled. The tool did not run."
        case CallStatus.REFUSED:
            output = f"Refused before asking anyone: {call.reason}. The tool did not run."
        case _:
            output = NEVER_COMPLETED
    return {
        "type": "tool_result",
        "tool_call_id": call.id,
        "tool_name": call.tool_name,
        "output": output,
        "is_error": is_error,
    }


def results(calls: list[ToolCall]) -> list[dict[str, Any]]:
    """The content of the ``tool`` message carrying the results of ``calls``, in the order they
    were proposed."""
    return [result_part(c) for c in calls]


def append_results(run: Run, calls: list[ToolCall]) -> None:
    """One ``tool`` message carrying the results of ``calls`` (none: no message)."""
    if calls:
        append(run, Role.TOOL, results(calls))


def build_request(run: Run, agent: Agent) -> ModelRequest:
    """The model request for the run's next step: the thread's whole transcript and the tools."""
    tools = tool_definitions(agent)
    said = rows.fetch_rows(sql.TRANSCRIPT, {"thread_id": run.thread_id})
    messages = outcomes.in_order([(row["role"], json.loads(row["content"])) for row in said])
    return request(agent, messages, tools)


def tool_definitions(agent: Agent) -> list[ToolDefinition]:
    """The agent's tools as a model request offers them."""
    return [ToolDefinition(t.name, describe(t), t.parameters_schema) for t in agent.offered_tools()]


def request(
    agent: Agent, messages: Sequence[Sequence[Any]], tools: list[ToolDefinition]
) -> ModelRequest:
    """A model request of ``messages``, ``(role, content)`` pairs in transcript order."""
    return ModelRequest(
        model=agent.model_name,
        instructions=agent.instructions,
        messages=[ModelMessage(role, parts) for role, parts in messages],
        tools=tools,
    )
