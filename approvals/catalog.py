"""What an agent offers: each of its tools with its kind, approval mode, the policy's standing
requirement and its presentation (``GET /agent/tools``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent_core.agents import Agent, describe, get_agent
from agent_core.choices import ToolKind
from agent_core.tools import ToolSpec

from .policy import get_policy
from .requirement import Requirement


@dataclass(frozen=True)
class ToolEntry:
    """One tool as a client is told about it."""

    name: str
    kind: str
    description: str
    approval_mode: str
    parameters: dict[str, Any]
    # The policy's requirement for every call of an action tool; ``None`` when it depends on the
    # call (or the tool is no action).
    requirement: Requirement | None
    confirmation: str
    prompt: str
    confirm: str  # "token": a confirmed tool (``agent_core.toolcalls.confirmed``); "" otherwise


def tools_of(agent_name: str) -> list[ToolEntry]:
    """The tools of the registered agent ``agent_name`` (raises ``AgentNotFound``)."""
    policy = get_policy()
    agent = get_agent(agent_name)
    return [_entry(agent, tool, policy.standing_requirement) for tool in agent.offered_tools()]


def _entry(agent: Agent, tool: ToolSpec, standing: Any) -> ToolEntry:
    action = tool.kind == ToolKind.ACTION
    return ToolEntry(
        name=tool.name,
        kind=tool.kind,
        description=describe(tool),
        approval_mode=agent.approval_mode_of(tool) or "",
        parameters=tool.parameters_schema,
        requirement=standing(tool) if action else None,
        confirmation=tool.confirmation,
        prompt=tool.prompt,
        confirm=tool.confirm or "",
    )
