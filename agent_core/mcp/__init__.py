"""Tools from MCP servers (SPEC §18), through the official ``mcp`` SDK.

``servers`` reads ``AGENT["MCP_SERVERS"]``; ``pool`` keeps one connection per server per process;
``catalog`` turns a server's tools into ``ToolSpec``s of the right kind. ``agent_core.agents`` is
the one place that reaches it: an agent's ``"mcp:<server>[/<tool>]"`` sources.

The SDK takes over a second to import: it is imported at the first use of a server, so a process
whose agents name none never pays for it.
"""

from __future__ import annotations

from ..tools import ToolSpec
from .servers import parse_source

__all__ = ["find", "offered", "parse_source"]


def offered(source: str) -> list[ToolSpec]:
    """The tools an MCP source offers now (``catalog.offered``)."""
    from . import catalog

    return catalog.offered(source)


def find(sources: tuple[str, ...], name: str) -> ToolSpec:
    """The MCP tool called ``name`` among ``sources`` (``catalog.find``)."""
    from . import catalog

    return catalog.find(sources, name)
