"""Marking a call a crash left ``in_doubt`` as done or not done, audited like a decision.

The durable-runner work adds ``approvals.services.mark_done`` / ``mark_not_done`` to the approval
port; until then the console resolves through ``agent_core.services.resolve_in_doubt`` here and
writes the same ``DecisionAttempt`` rows the port writes for every decision.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from agent_core import services as core
from agent_core.actors import Actor
from agent_core.agents import get_agent
from agent_core.exceptions import AgentCoreError, AlreadyDecided, NotFound
from agent_core.models import CallStatus, ToolCall
from approvals.models import Action, DecisionAttempt


def mark_done(call_id: str, result: Any, actor: Actor, *, via: str = "console") -> None:
    """The side effect happened: record ``result`` without running the tool again."""
    _resolve(call_id, Action.MARK_DONE, actor, via, done=True, result=result)


def mark_not_done(call_id: str, actor: Actor, *, via: str = "console") -> None:
    """The side effect did not happen: the call runs again (after a fresh approval when its
    tool asks for one on every attempt)."""
    _resolve(call_id, Action.MARK_NOT_DONE, actor, via, done=False)


def _resolve(
    call_id: str, action: Action, actor: Actor, via: str, *, done: bool, result: Any = None
) -> None:
    refusal: AgentCoreError | None = None
    with transaction.atomic():
        call = ToolCall.objects.filter(pk=call_id).first()
        if call is None:
            refusal = NotFound(f"no tool call {call_id}")
        else:
            tool = get_agent(call.run.agent).get_tool(call.tool_name)
            won = core.resolve_in_doubt(
                call_id,
                done=done,
                result=result,
                reapprove=not done and tool.approval_scope == "attempt",
                decided_by_ref=actor.ref,
            )
            if not won:
                call.refresh_from_db()
                refusal = AlreadyDecided(f"{call_id} is no longer in doubt: it is {call.status}")
        DecisionAttempt.objects.create(
            tool_call_id=call_id,
            run_id=call.run_id if call else "",
            thread_id=call.thread_id if call else "",
            tool_name=call.tool_name if call else "",
            action=action,
            actor_ref=actor.ref,
            via=via,
            outcome=refusal.code if refusal else "applied",
            detail=refusal.message if refusal else "",
        )
    if refusal is not None:
        raise refusal


def in_doubt_calls() -> Any:
    """Every call waiting on a person to say whether its side effect happened, oldest first."""
    return (
        ToolCall.objects.filter(status=CallStatus.IN_DOUBT)
        .select_related("run", "thread")
        .order_by("requested_at")
    )
