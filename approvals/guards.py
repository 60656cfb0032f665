"""What the approval port checks before it decides: the surface's name, whether the actor may
see the call at all, edited args asked of the policy again, and how far a deadline may move.

Each raises the refusal the port audits (or, for ``check_via``, refuses before any audit).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from agent_core.actors import Actor
from agent_core.agents import get_agent
from agent_core.choices import REQUESTER, SYSTEM_VIAS
from agent_core.engine.access import may_see_run
from agent_core.exceptions import ToolNotFound
from agent_core.models import Run, Thread, ToolCall
from agent_core.tools import ToolContext, ToolSpec

from .exceptions import EditNeedsApprover, InvalidDecision
from .policy import get_policy
from .requirement import Requirement


def check_via(via: str) -> None:
    """Refuse a surface name the system writes itself (``policy``, ``remembered``, …): a client
    claiming one would spoof the audit. Refused before anything is written, audit included."""
    if via in SYSTEM_VIAS or not via:
        raise InvalidDecision(f"via {via!r} is reserved for the system; name your surface")


def may_see(actor: Actor, call: ToolCall) -> bool:
    """Whether the call exists for the actor: it sees the call's run, or the policy lets it
    decide or answer the call. Every surface answers 404 for a call outside this."""
    policy = get_policy()
    if policy.can_decide(actor, call) or policy.can_answer(actor, call):
        return True
    return may_see_run(actor, call.run_id)


def tool_context(call: ToolCall, actor: Actor, thread: Thread) -> ToolContext:
    """What the call's tool functions (summary, edit checks) are handed, outside its run."""
    return ToolContext(
        run_id=call.run_id,
        thread_id=thread.pk,
        tool_call_id=call.pk,
        actor=actor,
        idempotency_key=call.idempotency_key,
    )


def check_edit(
    run: Run, call: ToolCall, tool: ToolSpec, args: dict[str, Any], ctx: ToolContext
) -> Requirement:
    """Edited (schema-valid) args are asked of the policy again (a yes given under one rule, a
    small refund, may not approve what another rule gives someone else, a large one), then
    checked by the tool (``editable``, ``validate_edit``). Returns the policy's answer."""
    requester = Actor(ref=run.actor_ref, roles=frozenset(run.actor_roles))
    need = get_policy().requirement_for(tool, args, requester, run.thread)
    if need.required and need.approver != call.approver:
        who = "the requester" if need.approver == REQUESTER else f"role {need.approver!r}"
        raise EditNeedsApprover(f"the edited arguments need the approval of {who}")
    try:
        tool.check_edit(ctx, call.args, args)
    except ValueError as exc:
        raise InvalidDecision(f"the edit is refused: {exc}") from exc
    return need


def extension_limit(run: Run, call: ToolCall) -> timedelta:
    """How far past now the call's deadline may move (SPEC §7: the policy bounds it)."""
    assert call.expires_at is not None
    policy = get_policy()
    try:
        tool = get_agent(run.agent).get_tool(call.tool_name)
    except ToolNotFound:
        return call.expires_at - call.requested_at  # the tool is gone: its own window
    requester = Actor(ref=run.actor_ref, roles=frozenset(run.actor_roles))
    ttl = policy.requirement_for(tool, call.args, requester, run.thread).ttl
    limit = policy.max_extension(tool, call, ttl=ttl)
    return limit if limit is not None else call.expires_at - call.requested_at
