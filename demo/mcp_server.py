"""The demo's own MCP server (the official SDK's server API): a warehouse with one read tool and
one action tool, each annotated. The demo agent reaches it as ``mcp:warehouse``.

Run it over stdio (what ``AGENT["MCP_SERVERS"]["warehouse"]`` starts) or over streamable HTTP:
``python -m demo.mcp_server`` / ``python -m demo.mcp_server --http 8765``. It needs no Django: the
reservations it makes are lines of ``DEMO_WAREHOUSE_LOG`` (a JSON-lines file), so every process
serving it sees the same stock and a test can count what ran.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

STOCK = {"SKU-1": 12, "SKU-2": 3, "SKU-3": 0}

server = MCPServer(
    "warehouse", instructions="Stock levels and reservations of the demo shop.", log_level="WARNING"
)


def _log() -> Path:
    default = Path(tempfile.gettempdir()) / "airlock-demo-warehouse.jsonl"
    return Path(os.environ.get("DEMO_WAREHOUSE_LOG", default))


def _reservations() -> list[dict[str, Any]]:
    path = _log()
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _available(sku: str) -> int:
    reserved = sum(r["quantity"] for r in _reservations() if r["sku"] == sku)
    return STOCK[sku] - reserved


@server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
def check_stock(sku: str) -> dict[str, Any]:
    """How many units of a SKU are in stock and not reserved."""
    if sku not in STOCK:
        raise ToolError(f"unknown SKU {sku!r}")
    return {"sku": sku, "available": _available(sku)}


@server.tool(
    annotations=ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
    )
)
def reserve_stock(sku: str, quantity: int, reference: str = "") -> dict[str, Any]:
    """Reserve units of a SKU for an order (the warehouse holds them until shipped)."""
    if sku not in STOCK:
        raise ToolError(f"unknown SKU {sku!r}")
    if quantity <= 0 or quantity > _available(sku):
        raise ToolError(f"cannot reserve {quantity} of {sku}: {_available(sku)} available")
    # A demo knob, as DEMO_REFUND_DELAY: a slow warehouse, so a crash can land mid-call.
    time.sleep(float(os.environ.get("DEMO_WAREHOUSE_DELAY", "0")))
    reservation = {"reservation_id": f"R-{time.time_ns()}", "sku": sku, "quantity": quantity}
    with _log().open("a") as log:
        log.write(json.dumps({**reservation, "reference": reference}) + "\n")
    return reservation


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on PORT")
    options = parser.parse_args()
    if options.http:
        server.run("streamable-http", host="127.0.0.1", port=options.http)
    else:
        server.run()


if __name__ == "__main__":
    main()
