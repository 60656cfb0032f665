"""Agents of the MCP tests."""

from __future__ import annotations

from typing import Any

from agent_core.agents import Agent
from agent_core.models import ToolCall
from agent_core.tools import ToolContext, tool

# Every tool of the tests' probe server (tests/mcp/server.py).
prober = Agent(name="prober", tools=("mcp:probe",))


@tool(kind="action")
def observe(ctx: ToolContext) -> dict[str, Any]:
    """Report the status of its own call while it runs."""
    return {"seen": ToolCall.objects.values_list("status", flat=True).get(pk=ctx.tool_call_id)}


stamper = Agent(name="stamper", tools=(observe,))
