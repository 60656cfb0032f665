"""A test agent whose tools exercise preflight and a tool that is never rememberable."""

from __future__ import annotations

from typing import Any

from agent_core.agents import Agent
from agent_core.tools import AlreadyDone, Confirm, Preflight, Refuse, ToolContext, tool
from demo.models import CachePurge


def _purge_preflight(ctx: ToolContext, args: dict[str, Any]) -> Preflight:
    if args["path"].startswith("/admin"):
        return Refuse("the admin area is never purged")
    done = CachePurge.objects.filter(path=args["path"]).first()
    if done is not None:
        return AlreadyDone({"purged": done.path, "purge_id": done.pk, "already": True})
    return Confirm(f"Purge {args['path']} from every edge location.")


@tool(kind="action", preflight=_purge_preflight)
def guarded_purge(ctx: ToolContext, path: str) -> dict[str, Any]:
    """Purge a path from the CDN unless it is off limits or already purged."""
    purge = CachePurge.objects.create(path=path, tool_call_id=ctx.tool_call_id)
    return {"purged": path, "purge_id": purge.pk}


@tool(kind="action", rememberable=False)
def wire_money(ctx: ToolContext, to: str, amount: int) -> dict[str, Any]:
    """Wire money; every transfer needs its own yes."""
    return {"wired": amount, "to": to}


@tool(kind="action", atomic=True)
def purge_then_fail(ctx: ToolContext, path: str) -> dict[str, Any]:
    """Record a purge, then fail: an atomic tool whose write must not outlive its error."""
    CachePurge.objects.create(path=path, tool_call_id=ctx.tool_call_id)
    raise RuntimeError("the edge refused")


ops_agent = Agent(name="ops", tools=(guarded_purge, wire_money, purge_then_fail))
