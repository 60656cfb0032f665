"""What an agent offers: each of its tools with its kind, approval mode, the policy's standing
requirement and its presentation (``GET /agent/tools``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent_core.agents import describe, get_agent
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


def tools_of(agent_name: str) -> list[ToolEntry]:
    """The tools of the registered agent ``agent_name`` (raises ``AgentNotFound``)."""
    policy = get_policy()
    return [_entry(tool, policy.standing_requirement) for tool in get_agent(agent_name).tools]


def approval_mode(tool: ToolSpec) -> str:
    """How a call of ``tool`` is decided: ``"blocking"`` (its run waits for the decision);
    ``""`` for tools that are not actions."""
    return "blocking" if tool.kind == ToolKind.ACTION else ""


def _entry(tool: ToolSpec, standing: Any) -> ToolEntry:
    action = tool.kind == ToolKind.ACTION
    return ToolEntry(
        name=tool.name,
        kind=tool.kind,
        description=describe(tool),
        approval_mode=approval_mode(tool),
        parameters=tool.parameters_schema,
        requirement=standing(tool) if action else None,
        confirmation=tool.confirmation,
        prompt=tool.prompt,
    )
