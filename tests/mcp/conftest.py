"""Real MCP server processes for the MCP tests: the demo's warehouse over stdio (started by the
pool, once per process) and over streamable HTTP (a process of this module's), and the tests'
own probe server (``tests/mcp/server.py``)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_for
from tests.processes import ROOT


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def accepting(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
    except OSError:
        return False
    return True


@pytest.fixture(scope="session")
def warehouse_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reservations the warehouse servers of this session make, one JSON line each."""
    return tmp_path_factory.mktemp("warehouse") / "reservations.jsonl"


@pytest.fixture(scope="session")
def warehouse_http(warehouse_log: Path) -> Iterator[str]:
    """The demo's warehouse served over streamable HTTP by a process of its own: its URL."""
    port = free_port()
    env = {"DEMO_WAREHOUSE_LOG": str(warehouse_log), "PYTHONPATH": str(ROOT), "PATH": ""}
    process = subprocess.Popen(
        [sys.executable, "-m", "demo.mcp_server", "--http", str(port)], cwd=ROOT, env=env
    )
    try:
        wait_for("the warehouse's HTTP server", lambda: accepting(port))
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait()


def stdio_warehouse(log: Path) -> dict[str, Any]:
    return {
        "command": [sys.executable, "-m", "demo.mcp_server"],
        "env": {"DEMO_WAREHOUSE_LOG": str(log), "PYTHONPATH": str(ROOT)},
        "cwd": str(ROOT),
    }


@pytest.fixture(params=["stdio", "http"])
def warehouse(request: Any, settings: Any, warehouse_log: Path) -> str:
    """``AGENT["MCP_SERVERS"]["warehouse"]`` over each transport; the transport's name."""
    if request.param == "stdio":
        config = stdio_warehouse(warehouse_log)
    else:
        config = {"url": request.getfixturevalue("warehouse_http")}
    settings.AGENT = {**settings.AGENT, "MCP_SERVERS": {"warehouse": config}}
    return str(request.param)


@pytest.fixture
def reference() -> str:
    """A reference no other test's reservation carries."""
    return f"ref-{uuid.uuid4().hex[:12]}"


def reservations(log: Path, reference: str) -> list[dict[str, Any]]:
    """The reservations the warehouse made with ``reference``."""
    if not log.exists():
        return []
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [r for r in lines if r.get("reference") == reference]


def probe_server() -> dict[str, Any]:
    """The tests' own MCP server (``tests/mcp/server.py``) over stdio."""
    return {
        "command": [sys.executable, "-m", "tests.mcp.server"],
        "env": {"PYTHONPATH": str(ROOT)},
        "cwd": str(ROOT),
        "timeout": 2,
    }
