"""Approvals as an MCP server (SPEC §18): an approver's MCP client (Claude Desktop, an IDE, any
client) lists what waits on them and decides it: ``list_pending``, ``get_call``, ``approve``,
``reject`` (with a reason), ``extend``.

Every tool acts as one approver, through the approval port (``decided_via: "mcp"``), so the
policy decides who may do what exactly as on every other surface, and every attempt is audited.
What the approver may not see is not listed, and asking for it answers ``not_found``, the same
answer as for an id that does not exist. Served over stdio by ``manage.py airlock_mcp --as
<user>`` and over streamable HTTP at ``/agent/mcp`` (``approvals.mcp_http``, token auth).

The same server offers each confirmed tool (``confirm="token"``, SPEC §17) of the configured
agents as ``<agent>__<tool>``, acting as the same person: called without ``confirm_token`` it
answers a preview and a single-use token; called again with the same ``args`` and that token it
commits, once (``agent_core.toolcalls.confirmed``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from functools import wraps
from typing import Any, ParamSpec, TypeVar

from django.db import close_old_connections
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import ToolAnnotations

from agent_core.actors import Actor
from agent_core.agents import Agent, registered_agents
from agent_core.exceptions import AgentCoreError, NotFound
from agent_core.models import ToolCall
from agent_core.toolcalls import confirmed
from agent_core.tools import ToolSpec

from . import amendments, guards, selectors
from . import services as port

VIA = "mcp"
LISTED = 100  # the oldest calls list_pending shows
P = ParamSpec("P")
T = TypeVar("T")

ActorOf = Callable[[Context], Actor]

_READS = ToolAnnotations(read_only_hint=True, open_world_hint=False)
# A decision changes what a run does next; repeating it changes nothing (``unchanged``).
_DECIDES = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=True
)
# A confirmed tool acts on the world (a refund); its commit can be made once only.
_CONFIRMED = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True
)


def _port(func: Callable[P, T]) -> Callable[P, T]:
    """Run a tool in Django's terms: fresh database connections (the SDK runs each sync tool
    on a worker thread of its own), and the port's refusals as the tool's errors."""

    @wraps(func)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        close_old_connections()
        try:
            return func(*args, **kwargs)
        except AgentCoreError as exc:
            raise ToolError(f"{exc.code}: {exc.message}") from exc
        finally:
            close_old_connections()

    return run


def shown(call: ToolCall) -> dict[str, Any]:
    """A call as the approver's client sees it: everything needed to decide it."""
    return {
        "tool_call_id": call.pk,
        "status": call.status,
        "tool_name": call.tool_name,
        "kind": call.kind,
        "args": call.args,
        "summary": call.summary,
        "confirmation": call.confirmation,
        "approver": call.approver,
        "requester": call.requester_ref,
        "agent": call.run.agent,
        "run_id": call.run_id,
        "thread_id": call.thread_id,
        "requested_at": call.requested_at.isoformat() if call.requested_at else None,
        "expires_at": call.expires_at.isoformat() if call.expires_at else None,
        "decided_by": call.decided_by_ref,
        "decided_via": call.decided_via,
        "reason": call.reason,
    }


def build(actor_of: ActorOf) -> MCPServer:
    """The approvals MCP server, acting as ``actor_of(ctx)`` on each request."""
    server = MCPServer(
        "airlock-approvals",
        instructions="Tool calls of AI agents that wait on your decision. List them, read one, "
        "then approve or reject it (say why), or extend its deadline.",
        log_level="WARNING",
        tools=[
            _confirmed_tool(agent, spec, actor_of)
            for agent in registered_agents().values()
            for spec in agent.local_tools
            if spec.confirm == "token"
        ],
    )

    @server.tool(annotations=_READS)
    @_port
    def list_pending(ctx: Context) -> list[dict[str, Any]]:
        """The calls waiting on your decision (or your answer), oldest first."""
        calls = selectors.pending_for(actor_of(ctx)).select_related("run")[:LISTED]
        return [shown(call) for call in calls]

    @server.tool(annotations=_READS)
    @_port
    def get_call(tool_call_id: str, ctx: Context) -> dict[str, Any]:
        """One tool call: what it does, its arguments, who must decide, and its status."""
        call = ToolCall.objects.select_related("run").filter(pk=tool_call_id).first()
        if call is None or not guards.may_see(actor_of(ctx), call):
            raise NotFound(f"no tool call {tool_call_id}")
        return shown(call)

    @server.tool(annotations=_DECIDES)
    @_port
    def approve(tool_call_id: str, ctx: Context, remember: bool = False) -> dict[str, Any]:
        """Approve a waiting call: it runs, once. ``remember``: also later calls of the same
        tool in the same thread."""
        return _decided(port.approve(tool_call_id, actor=actor_of(ctx), remember=remember, via=VIA))

    @server.tool(annotations=_DECIDES)
    @_port
    def reject(tool_call_id: str, reason: str, ctx: Context) -> dict[str, Any]:
        """Reject a waiting call: it never runs, and the agent is told ``reason``."""
        return _decided(port.reject(tool_call_id, actor=actor_of(ctx), reason=reason, via=VIA))

    @server.tool(annotations=_DECIDES)
    @_port
    def extend(tool_call_id: str, minutes: float, ctx: Context) -> dict[str, Any]:
        """Move a waiting call's deadline to ``minutes`` from now (the policy bounds it)."""
        ttl = timedelta(minutes=minutes)
        outcome = amendments.extend(tool_call_id, actor=actor_of(ctx), ttl=ttl, via=VIA)
        deadline = outcome.call.expires_at
        assert deadline is not None  # a deadline was extended
        return {"tool_call_id": tool_call_id, "expires_at": deadline.isoformat()}

    return server


def _confirmed_tool(agent: Agent, spec: ToolSpec, actor_of: ActorOf) -> Tool:
    """``spec`` of ``agent`` as an MCP tool: a preview without ``confirm_token``, the commit
    with it. Its ``args`` are described by the tool's own input schema."""

    @_port
    def call(
        args: dict[str, Any], ctx: Context, confirm_token: str | None = None
    ) -> dict[str, Any]:
        answer = confirmed.call(
            agent.name, spec.name, args, actor=actor_of(ctx), confirm_token=confirm_token
        )
        if isinstance(answer, confirmed.Preview):
            return {
                "status": "preview",
                "args": answer.args,
                "preview": answer.preview,
                "confirm_token": answer.confirm_token,
                "expires_at": answer.expires_at.isoformat(),
            }
        return {
            "status": "committed",
            "args": answer.args,
            "result": answer.result,
            "confirmation_id": answer.confirmation_id,
        }

    made = Tool.from_function(
        call,
        name=f"{agent.name}__{spec.name}",
        description=f"{spec.description}\n\nConfirmed: call it without confirm_token for a "
        "preview and a token; show the preview to the user; only once they agree, call it "
        "again with the same args and that confirm_token to run it, once.",
        annotations=_CONFIRMED,
    )
    schema = dict(spec.parameters_schema)
    if "$defs" in schema:  # the tool's models are referred to from the root: move them there
        made.parameters["$defs"] = {**made.parameters.get("$defs", {}), **schema.pop("$defs")}
    made.parameters["properties"]["args"] = schema
    return made


def _decided(outcome: port.Outcome) -> dict[str, Any]:
    """What a decision tool answers: the call's status as the decision left it, and whether it
    changed anything."""
    return {
        "tool_call_id": outcome.call.pk,
        "status": outcome.call.status,
        "outcome": outcome.result.value,
    }
