"""Every tool every registered agent can reach, and what stands between its calls and their effect
(SPEC §18, ``manage.py agent tools``): its kind, its approval mode and the policy's requirement.

The loop sends every call of an ``action`` tool to the gate (``agent_core.gate``) before it may
run, whatever the tool's source: declared in Python, listed by an MCP server (now or later), or a
delegate. The requirement shown is the policy's answer for a call without arguments; a tool whose
rules look at the arguments is marked so.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.module_loading import import_string

from agent_core.actors import Actor
from agent_core.agents import Agent, registered_agents
from agent_core.gate import RefuseActions, gate_path
from agent_core.models import Thread
from agent_core.tools import ToolSpec

from .gate import ApprovalGate
from .policy import get_policy
from .rules import configured_rules


@dataclass(frozen=True)
class ToolReach:
    """One tool one agent can call."""

    agent: str
    tool: str
    source: str  # "python", "mcp:<server>", "delegate:<agent>"
    kind: str
    approval_mode: str
    requirement: str


def reachable() -> list[ToolReach]:
    """Every tool of every registered agent (MCP tools as their servers list them now)."""
    return [
        _reach(agent, tool)
        for agent in sorted(registered_agents().values(), key=lambda a: a.name)
        for tool in agent.offered_tools()
    ]


def _reach(agent: Agent, tool: ToolSpec) -> ToolReach:
    source = tool.source or (f"delegate:{tool.delegate}" if tool.delegate else "python")
    # Every call of a tool waits for its decision within its run (the only mode today).
    mode = agent.approval_mode_of(tool) or "-"  # "-": no action
    return ToolReach(agent.name, tool.name, source, tool.kind, mode, requirement(agent, tool))


def requirement(agent: Agent, tool: ToolSpec) -> str:
    """What must happen before a call of ``tool`` runs, in words."""
    if tool.kind == "read":
        # A delegate's own calls are its run's: each of its actions asks for itself.
        return "none (its run's actions are gated)" if tool.delegate else "none (read)"
    if tool.kind == "human":
        return "the user's answer"
    gate = import_string(gate_path())
    if gate is RefuseActions:
        return "refused: no approval app"
    if not issubclass(gate, ApprovalGate):
        return f"asked of {gate_path()}"
    thread = Thread(owner_ref="", agent=agent.name)
    needed = get_policy().requirement_for(tool, {}, Actor(ref=""), thread)
    said = _said(needed.required, needed.stored_approver, needed.ttl, needed.quorum)
    if any(rule.when for rule in configured_rules().get(tool.name, ())):
        said += " (rules on its args may change it)"
    return said


def _said(required: bool, approver: str, ttl: object, quorum: int) -> str:
    if not required:
        return "none (the policy lets it run)"
    said = f"approval by {approver}"
    if quorum > 1:
        said += f", {quorum} approvers"
    if ttl is not None:
        said += f", within {ttl}"
    return said


def table(rows: list[ToolReach]) -> list[str]:
    """``rows`` as aligned text lines, headed."""
    head = ("AGENT", "TOOL", "SOURCE", "KIND", "MODE", "REQUIREMENT")
    cells = [
        head,
        *((r.agent, r.tool, r.source, r.kind, r.approval_mode, r.requirement) for r in rows),
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(head) - 1)]
    return [
        "  ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)), row[-1]])
        for row in cells
    ]
