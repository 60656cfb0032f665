"""What an MCP tool call costs over a local tool's (SPEC §18): the demo warehouse's read tool,
``check_stock``, called through ``agent_core.mcp`` over stdio and over streamable HTTP, against
the same function declared as a local ``@tool``. Each is called warm (the process's connection
open, the server's listing cached) ``--calls`` times; the first call of a process (starting or
reaching the server, listing its tools) is timed apart.

    python -m bench.mcp_call [--calls 300]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import django

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _timed(call: Callable[[], Any], n: int) -> list[float]:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    n = parser.parse_args().calls
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.dev")
    django.setup()

    from agent_core.actors import Actor
    from agent_core.mcp.catalog import as_tool, listed
    from agent_core.mcp.servers import ServerConfig
    from agent_core.tools import ToolContext, tool
    from demo import mcp_server

    ctx = ToolContext("run_b", "thr_b", "tc_b", Actor(ref="bench"), "key")
    local = tool(kind="read", name="check_stock")(lambda ctx, sku: mcp_server.check_stock(sku))
    port = _free_port()
    http = subprocess.Popen(
        [sys.executable, "-m", "demo.mcp_server", "--http", str(port)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        configs = {
            "stdio": ServerConfig(name="stdio", command=(sys.executable, "-m", "demo.mcp_server")),
            "http": ServerConfig(name="http", url=f"http://127.0.0.1:{port}/mcp"),
        }
        while True:  # the HTTP server is up
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        rows = [("local @tool", "", _timed(lambda: local(ctx, {"sku": "SKU-1"}), n))]
        for transport, config in configs.items():
            start = time.perf_counter()
            spec = as_tool(config, listed(config)["check_stock"])
            first = (time.perf_counter() - start) * 1000
            spec(ctx, {"sku": "SKU-1"})  # the first call itself
            rows.append(
                (
                    f"MCP, {transport}",
                    f"{first:.0f}",
                    _timed(partial(spec, ctx, {"sku": "SKU-1"}), n),
                )
            )
    finally:
        http.terminate()
        http.wait()
    base = statistics.median(rows[0][2])
    print(f"{n} warm calls each; ms per call (first: connect/start + list, once per process)")
    print("| tool | first (ms) | median (ms) | p95 (ms) | median over local |")
    print("|---|---|---|---|---|")
    for name, opened, times in rows:
        median = statistics.median(times)
        p95 = statistics.quantiles(times, n=20)[-1]
        print(f"| {name} | {opened or '-'} | {median:.3f} | {p95:.3f} | +{median - base:.3f} ms |")


if __name__ == "__main__":
    main()
