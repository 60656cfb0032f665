"""Declaring agents and finding them by name through ``AGENT["AGENTS"]`` (dotted paths)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Literal

import pydantic
from django.utils.module_loading import import_string

from . import mcp
from .conf import agent_settings
from .exceptions import AgentNotFound, ToolNotFound
from .providers import get_provider
from .providers.base import ModelProvider
from .tools import ApprovalMode, ToolSpec


@dataclass(frozen=True)
class Delegate:
    """An agent another agent may hand work to (SPEC §14), offered to its model as a tool:
    ``ask_<agent>`` waits for the child run's answer, ``start_<agent>`` (``detached``) returns
    the child's run id at once. ``kind="action"``: a person approves the call first."""

    agent: str
    kind: Literal["read", "action"] = "read"
    detached: bool = False
    name: str = ""  # the tool's name; default ``ask_<agent>`` / ``start_<agent>``

    def as_tool(self) -> ToolSpec:
        verb = "start" if self.detached else "ask"
        return ToolSpec(
            name=self.name or f"{verb}_{self.agent}",
            description="",  # the delegate's own description, read when a request is built
            kind=self.kind,
            args_model=DelegateArgs,
            func=None,
            delegate=self.agent,
            detached=self.detached,
        )


class DelegateArgs(pydantic.BaseModel):
    """The input of a delegation: the message the child run starts with."""

    model_config = pydantic.ConfigDict(extra="forbid")
    message: str


@dataclass(frozen=True, kw_only=True)
class Agent:
    """An agent: its instructions, its model (``None``: ``AGENT["MODEL"]``), tools and delegates
    (agent names or ``Delegate`` objects); ``description``: what agents delegating to it read;
    ``approval_mode``: that of its action tools which declare none.

    ``tools`` holds tools declared in Python and MCP tool sources (SPEC §18): ``"mcp:<server>"``
    (every tool of that server in ``AGENT["MCP_SERVERS"]``) or ``"mcp:<server>/<tool>"``."""

    name: str
    instructions: str = ""
    description: str = ""
    model: str | None = None
    tools: tuple[ToolSpec | str, ...] = ()
    delegates: tuple[str | Delegate, ...] = ()
    # Per-run limits (SPEC §16, ``runner.limits``); ``None``: the ``AGENT`` setting of that name.
    max_steps_per_run: int | None = None
    max_tool_calls_per_run: int | None = None
    tool_loop_limit: int | None = None
    # Of its action tools that declare none (SPEC §17); delegations always block.
    approval_mode: ApprovalMode = "blocking"
    # A chat message that is, as a whole, a decision word decides the pending call (SPEC §17).
    text_decisions: bool = False
    local_tools: tuple[ToolSpec, ...] = field(init=False, repr=False, compare=False)
    mcp_sources: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _by_name: dict[str, ToolSpec] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        delegates = tuple(d if isinstance(d, Delegate) else Delegate(d) for d in self.delegates)
        object.__setattr__(self, "delegates", delegates)
        sources = tuple(t for t in self.tools if isinstance(t, str))
        for source in sources:
            mcp.parse_source(source)  # a malformed one fails here, at import
        declared = tuple(t for t in self.tools if not isinstance(t, str))
        local = (*declared, *(d.as_tool() for d in delegates))
        object.__setattr__(self, "local_tools", local)
        object.__setattr__(self, "mcp_sources", sources)
        object.__setattr__(self, "tools", (*local, *sources))
        by_name = {t.name: t for t in local}
        if len(by_name) != len(local):
            raise ValueError(f"agent {self.name}: two tools share a name")
        object.__setattr__(self, "_by_name", by_name)

    def offered_tools(self) -> list[ToolSpec]:
        """Every tool the model is offered now: the local ones, then those of its MCP sources
        (listed from their servers; none of a server that is down)."""
        return [*self.local_tools, *(t for s in self.mcp_sources for t in mcp.offered(s))]

    @property
    def model_name(self) -> str:
        return self.model or agent_settings().MODEL

    def provider(self) -> ModelProvider:
        """What takes the agent's model steps (a composition plans its own: ``compositions``)."""
        return get_provider(self.model_name)

    def approval_mode_of(self, tool: ToolSpec) -> ApprovalMode | None:
        """How a call of ``tool`` waits for its decision; ``None``: it is no action."""
        if tool.kind != "action":
            return None
        if tool.delegate:
            return "blocking"
        return tool.approval_mode or self.approval_mode

    def get_tool(self, name: str) -> ToolSpec:
        try:
            return self._by_name[name]
        except KeyError:
            if not self.mcp_sources:
                raise ToolNotFound(f"agent {self.name!r} has no tool {name!r}") from None
        return mcp.find(self.mcp_sources, name)


def describe(tool: ToolSpec) -> str:
    """What the model is told about ``tool``: a delegation tool speaks for its delegate."""
    if not tool.delegate:
        return tool.description
    try:
        delegate = get_agent(tool.delegate)
    except AgentNotFound:
        return f"The {tool.delegate} agent (not available)."
    about = delegate.description or delegate.instructions or f"The {delegate.name} agent."
    if tool.detached:
        return f"{about}\nStarts it on `message` and returns its run id at once."
    return f"{about}\nHands it `message` and returns its final answer."


def registered_agents() -> dict[str, Agent]:
    """Every agent listed in ``AGENT["AGENTS"]``, by name."""
    return dict(_agents(tuple(agent_settings().AGENTS)))


@functools.cache
def _agents(paths: tuple[str, ...]) -> dict[str, Agent]:
    # Once per list of paths (an agent is a module's object: importing it again finds the same
    # one), not at every step's ``get_agent``.
    agents: dict[str, Agent] = {}
    for path in paths:
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
