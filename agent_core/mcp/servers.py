"""``AGENT["MCP_SERVERS"]``: the MCP servers agents take tools from, one entry a server.

``{"<name>": {"command": [...], "env": {...}}}`` starts a stdio server (once per process);
``{"<name>": {"url": "...", "headers": {...}}}`` reaches a streamable HTTP server. Options of
both: ``timeout`` (seconds a call may take, default 30), ``connect_timeout`` (seconds to start
or reach the server, default 30), ``list_ttl`` (seconds a tool listing is reused, default 60),
``kinds`` (tool name -> ``"read"`` / ``"action"``, over what the server's annotations say),
``recover`` (the dotted path of a ``recover(ctx, args)`` for its calls found in doubt).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from django.utils.module_loading import import_string

from ..conf import agent_settings
from ..tools import RecoverFn

PREFIX = "mcp:"
# A server's name is part of its tools' names (``mcp__<server>__<tool>``), which model vendors
# limit to letters, digits, ``_`` and ``-``; ``__`` separates the parts.
NAME = re.compile(r"^[A-Za-z0-9-]+(_[A-Za-z0-9-]+)*$")


@dataclass(frozen=True, kw_only=True)
class ServerConfig:
    """One entry of ``AGENT["MCP_SERVERS"]``."""

    name: str
    command: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float = 30.0
    connect_timeout: float = 30.0
    list_ttl: float = 60.0
    kinds: dict[str, Literal["read", "action"]] = field(default_factory=dict)
    recover: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "command", tuple(self.command))
        if not NAME.match(self.name):
            raise ValueError(
                f"MCP server name {self.name!r}: use letters, digits, '-' and single '_'"
            )
        if bool(self.command) == bool(self.url):
            raise ValueError(f"MCP server {self.name!r}: give either 'command' or 'url'")
        for tool, kind in self.kinds.items():
            if kind not in ("read", "action"):
                raise ValueError(f"MCP server {self.name!r}: kinds[{tool!r}] is not read/action")

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command else "http"

    def recover_fn(self) -> RecoverFn | None:
        fn: RecoverFn | None = import_string(self.recover) if self.recover else None
        return fn


def server_configs() -> dict[str, ServerConfig]:
    """Every configured MCP server, by name; raises ``ValueError`` / ``TypeError`` on a bad one."""
    # Parsed at each use (a few small objects): the settings may change under a test.
    servers: dict[str, dict[str, Any]] = agent_settings().MCP_SERVERS
    return {name: ServerConfig(name=name, **options) for name, options in servers.items()}


def parse_source(source: str) -> tuple[str, str | None]:
    """``"mcp:<server>"`` -> (server, None); ``"mcp:<server>/<tool>"`` -> (server, tool)."""
    if not source.startswith(PREFIX):
        raise ValueError(f"{source!r} is not an MCP tool source ('mcp:<server>[/<tool>]')")
    server, _, tool = source[len(PREFIX) :].partition("/")
    if not server:
        raise ValueError(f"{source!r} names no server")
    return server, tool or None
