"""Declaring agents and finding them by name through ``AGENT["AGENTS"]`` (dotted paths)."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.utils.module_loading import import_string

from .conf import agent_settings
from .exceptions import AgentNotFound, ToolNotFound
from .tools import ToolSpec


@dataclass(frozen=True, kw_only=True)
class Agent:
    """An agent: its instructions, its model (``None``: ``AGENT["MODEL"]``), tools and delegates."""

    name: str
    instructions: str = ""
    model: str | None = None
    tools: tuple[ToolSpec, ...] = ()
    delegates: tuple[str, ...] = ()
    _by_name: dict[str, ToolSpec] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tools", tuple(self.tools))
        object.__setattr__(self, "delegates", tuple(self.delegates))
        by_name = {t.name: t for t in self.tools}
        if len(by_name) != len(self.tools):
            raise ValueError(f"agent {self.name}: two tools share a name")
        object.__setattr__(self, "_by_name", by_name)

    @property
    def model_name(self) -> str:
        return self.model or agent_settings().MODEL

    def get_tool(self, name: str) -> ToolSpec:
        try:
            return self._by_name[name]
        except KeyError:
            raise ToolNotFound(f"agent {self.name!r} has no tool {name!r}") from None


def registered_agents() -> dict[str, Agent]:
    """Every agent listed in ``AGENT["AGENTS"]``, by name."""
    agents: dict[str, Agent] = {}
    for path in agent_settings().AGENTS:
        agent = import_string(path)
        if not isinstance(agent, Agent):
            raise TypeError(f"{path} is not an agent_core.agents.Agent")
        agents[agent.name] = agent
    return agents


def get_agent(name: str) -> Agent:
    """The registered agent called ``name``; raises ``AgentNotFound``."""
    try:
        return registered_agents()[name]
    except KeyError:
        raise AgentNotFound(f"no agent is registered as {name!r}") from None
