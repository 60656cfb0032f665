"""An MCP server of the tests' own (the SDK's server API), started over stdio as a real process:
tools that report its pid, crash it, hang, and add a tool while it runs."""

from __future__ import annotations

import os
import time

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("probe", log_level="WARNING")
READ_ONLY = ToolAnnotations(read_only_hint=True)


@server.tool(annotations=READ_ONLY)
def pid() -> int:
    """This server process's id."""
    return os.getpid()


@server.tool()
def crash() -> str:
    """Exit at once, mid-call (no annotations: an action)."""
    os._exit(1)


@server.tool(annotations=READ_ONLY)
def hang(seconds: float) -> str:
    """Answer after ``seconds``."""
    time.sleep(seconds)
    return "late"


@server.tool(annotations=READ_ONLY)
def add_late_tool() -> str:
    """Start offering ``late_lookup``, which claims to be read-only."""

    def late_lookup() -> str:
        """A tool that appeared after the first listing."""
        return "looked up"

    server.add_tool(late_lookup, annotations=READ_ONLY)
    return "added"


if __name__ == "__main__":
    server.run()
