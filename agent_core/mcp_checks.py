"""System checks of the MCP tool sources (SPEC §18): ``agent_core.E040`` in every process's
checks; ``E041``, ``W040`` and ``W041``, which list each configured server's tools (starting
each stdio server once, stopped when the process ends), only under ``manage.py check --deploy``:
run at every start-up they started the servers in each worker, each server process and each test
that starts one, for messages that do not change between them."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error, Warning, register

from .exceptions import McpUnavailable
from .mcp.servers import ServerConfig, parse_source, server_configs


@register()
def check_mcp_servers(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The servers parse and the agents name configured ones (no server contacted)."""
    from .agents import registered_agents

    try:
        configs = server_configs()
        agents = registered_agents()
    except (TypeError, ValueError, ImportError) as exc:
        if isinstance(exc, ValueError) or "MCP" in str(exc):
            return [_invalid(str(exc))]
        return []  # the agents are reported by check_agent_settings
    messages: list[CheckMessage] = []
    for agent in agents.values():
        for source in agent.mcp_sources:
            server, _ = parse_source(source)
            if server not in configs:
                messages.append(_invalid(f"agent {agent.name!r} names {source!r}", server))
    return messages


def _invalid(said: str, server: str = "") -> Error:
    return Error(
        f"{said}: no MCP server {server!r} is configured" if server else f"MCP_SERVERS: {said}",
        id="agent_core.E040",
        hint='AGENT["MCP_SERVERS"] = {"<name>": {"command": [...]} or {"url": "..."}}; '
        'agents name "mcp:<name>" or "mcp:<name>/<tool>".',
    )


@register(deploy=True)
def check_mcp_tools(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """No tool's configured kind lets an effect run without the gate; a server whose tools carry
    no annotations, or that cannot be reached, is warned of."""
    try:
        configs = server_configs()
    except (TypeError, ValueError, ImportError):
        return []  # reported by check_mcp_servers
    messages: list[CheckMessage] = []
    for config in configs.values():
        messages += _check_server(config)
    return messages


def _check_server(config: ServerConfig) -> list[CheckMessage]:
    from .mcp.catalog import listed

    try:
        tools = listed(config)
    except McpUnavailable as exc:
        return [
            Warning(
                f"MCP server {config.name!r} could not be reached to check its tools: "
                f"{exc.message}",
                id="agent_core.W041",
                hint="Its tools are not offered while it is down (calls of them fail clearly).",
            )
        ]
    messages: list[CheckMessage] = []
    for name, kind in sorted(config.kinds.items()):
        annotations = tools[name].annotations if name in tools else None
        if kind == "read" and not (annotations is not None and annotations.read_only_hint):
            messages.append(
                Error(
                    f"MCP_SERVERS[{config.name!r}]['kinds'] makes {name!r} a read tool, which "
                    "its server does not say is read-only: its calls would run without the gate.",
                    id="agent_core.E041",
                    hint="Remove the entry (it is then an action, gated by the policy), or have "
                    "the server annotate the tool readOnlyHint: true.",
                )
            )
    if tools and all(t.annotations is None for t in tools.values()):
        messages.append(
            Warning(
                f"The tools of MCP server {config.name!r} carry no annotations: every one of "
                "them is an action, and the policy learns nothing of their effects.",
                id="agent_core.W040",
                hint="Annotate them on the server (readOnlyHint, destructiveHint, ...), or set "
                "their kinds in MCP_SERVERS[...]['kinds'].",
            )
        )
    return messages
