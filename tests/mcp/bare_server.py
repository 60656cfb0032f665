"""An MCP server whose one tool carries no annotations (the check warns of it)."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("bare", log_level="WARNING")


@server.tool()
def touch(path: str) -> str:
    """Touch a file (says nothing of its effects)."""
    return path


if __name__ == "__main__":
    server.run()
