"""MCP tools as ``ToolSpec``s: what an agent naming ``mcp:<server>[/<tool>]`` is offered.

A tool is offered to the model as ``mcp__<server>__<tool>``. Its kind (SPEC §18): ``read`` only
when the server annotates it ``readOnlyHint: true`` (or ``kinds`` in the server's settings says
so); every other tool is an ``action``, gated by the policy, which finds the annotations on
``ToolSpec.annotations``. A tool this process first sees after its first listing of the server
(it appeared on the server later) is an action whatever it claims, until configured otherwise.
The kind is stamped on the call when it is proposed (SPEC §3); what a later listing says never
changes a call already made.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

import pydantic
from mcp import MCPError
from mcp.types import CallToolResult, Tool

from ..exceptions import McpUnavailable, ToolNotFound
from ..tools import Kind, ToolContext, ToolSpec
from .pool import pool
from .servers import ServerConfig, parse_source, server_configs

logger = logging.getLogger(__name__)

SEPARATOR = "__"
PREFIX = f"mcp{SEPARATOR}"
# What model vendors accept as a tool's name.
_MODEL_SAFE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class McpToolError(Exception):
    """The MCP server answered the call with an error."""


class McpArgs(pydantic.BaseModel):
    """Any JSON object: the server validates the arguments against its own input schema."""

    model_config = pydantic.ConfigDict(extra="allow")


def tool_name(server: str, tool: str) -> str:
    """The name the model calls an MCP tool by."""
    return f"{PREFIX}{server}{SEPARATOR}{tool}"


def split_name(name: str) -> tuple[str, str] | None:
    """``mcp__<server>__<tool>`` -> (server, tool); any other name -> None."""
    if not name.startswith(PREFIX):
        return None
    server, sep, tool = name[len(PREFIX) :].partition(SEPARATOR)
    return (server, tool) if sep and server and tool else None


@dataclass
class _Listing:
    config: ServerConfig  # the server's settings when it was listed
    tools: dict[str, Tool]
    at: float


class _Catalog:
    """This process's listings of each server, and the tools of its first listing (the
    baseline: a tool outside it appeared later)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listings: dict[str, _Listing] = {}
        self._baseline: dict[str, frozenset[str]] = {}

    def listing(self, config: ServerConfig, *, fresh: bool = False) -> dict[str, Tool]:
        with self._lock:
            held = self._listings.get(config.name)
        if held is not None and held.config == config and not fresh:
            if time.monotonic() - held.at < config.list_ttl:
                return held.tools
        tools = {t.name: t for t in pool().list_tools(config)}
        with self._lock:
            if held is not None and held.config != config:
                self._baseline.pop(config.name, None)  # another server now: listed afresh
            self._listings[config.name] = _Listing(config, tools, time.monotonic())
            self._baseline.setdefault(config.name, frozenset(tools))
        return tools

    def known_from_start(self, server: str, tool: str) -> bool:
        with self._lock:
            return tool in self._baseline.get(server, frozenset())


_catalog = _Catalog()


def kind_of(config: ServerConfig, tool: Tool) -> Kind:
    """``read`` only for a tool its server says is read-only (and said so from the start), or
    that the settings call read; anything else is an action."""
    if tool.name in config.kinds:
        return config.kinds[tool.name]
    read_only = tool.annotations is not None and tool.annotations.read_only_hint is True
    return "read" if read_only and _catalog.known_from_start(config.name, tool.name) else "action"


def annotations_of(tool: Tool) -> dict[str, Any]:
    """The tool's annotations as the server sent them (``readOnlyHint``, ``destructiveHint``,
    ``idempotentHint``, ``openWorldHint``, ``title``); {} without any."""
    if tool.annotations is None:
        return {}
    return tool.annotations.model_dump(mode="json", by_alias=True, exclude_none=True)


def as_tool(config: ServerConfig, tool: Tool) -> ToolSpec:
    """The ``ToolSpec`` of one MCP tool."""

    def call(ctx: ToolContext, **args: Any) -> Any:
        try:
            result = pool().call_tool(config, tool.name, args)
        except MCPError as exc:
            raise McpToolError(exc.message) from exc
        return result_of(result)

    return ToolSpec(
        name=tool_name(config.name, tool.name),
        description=tool.description or tool.title or tool.name,
        kind=kind_of(config, tool),
        args_model=McpArgs,
        func=call,
        recover=config.recover_fn(),
        input_schema=dict(tool.input_schema),
        annotations=annotations_of(tool),
        source=f"mcp:{config.name}",
    )


def result_of(result: CallToolResult) -> Any:
    """An MCP result as a tool result: its structured content, else its text (one string), else
    its content blocks; ``isError`` raises ``McpToolError`` with the server's text."""
    texts = [block.text for block in result.content if block.type == "text"]
    if result.is_error:
        raise McpToolError("\n".join(texts) or "the MCP tool failed")
    if result.structured_content is not None:
        return result.structured_content
    if len(texts) == len(result.content):
        return "\n".join(texts)
    return [
        block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content
    ]


def listed(config: ServerConfig) -> dict[str, Tool]:
    """The server's tools by name, as this process last listed them (within ``list_ttl``)."""
    return _catalog.listing(config)


def offered(source: str) -> list[ToolSpec]:
    """The tools ``source`` (``mcp:<server>`` or ``mcp:<server>/<tool>``) offers now; none, with
    a warning in the log, while its server is unavailable (the run goes on without them)."""
    server, only = parse_source(source)
    config = server_configs().get(server)
    if config is None:  # reported by the system check agent_core.E040
        logger.warning("%s offers no tools: no MCP server %r is configured", source, server)
        return []
    try:
        listing = _catalog.listing(config)
    except McpUnavailable as exc:
        logger.warning("%s offers no tools now: %s", source, exc.message)
        return []
    if only is None:
        chosen = list(listing.values())
    else:
        chosen = [listing[only]] if only in listing else []
    return [as_tool(config, t) for t in chosen if _offerable(config, t)]


def find(sources: tuple[str, ...], name: str) -> ToolSpec:
    """The MCP tool called ``name`` among ``sources``; ``ToolNotFound`` says why when it is not
    (not offered, or its server unavailable)."""
    parts = split_name(name)
    if parts is None:
        raise ToolNotFound(f"no tool {name!r}")
    server, tool = parts
    if f"mcp:{server}" not in sources and f"mcp:{server}/{tool}" not in sources:
        raise ToolNotFound(f"no tool {name!r}")
    config = server_configs().get(server)
    if config is None:
        raise ToolNotFound(f"no MCP server {server!r} is configured")
    try:
        listing = _catalog.listing(config)
        if tool not in listing:  # perhaps it appeared since: look again
            listing = _catalog.listing(config, fresh=True)
    except McpUnavailable as exc:
        raise ToolNotFound(exc.message) from exc
    if tool not in listing:
        raise ToolNotFound(f"MCP server {server!r} has no tool {tool!r}")
    return as_tool(config, listing[tool])


def _offerable(config: ServerConfig, tool: Tool) -> bool:
    if _MODEL_SAFE.match(tool_name(config.name, tool.name)):
        return True
    logger.warning(
        "MCP tool %r of %s: its name cannot be offered to a model", tool.name, config.name
    )
    return False
