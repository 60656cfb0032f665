"""``manage.py check`` on the MCP tool sources (SPEC §18): an agent naming a server nobody
configured; and under ``--deploy``, which lists each server's tools, a tool made ``read`` that its
server does not say is read-only (an effect would run ungated), a server whose tools carry no
annotations, a server that is down."""

from __future__ import annotations

import sys

import pytest
from django.core.checks import run_checks

from tests.mcp.conftest import free_port, probe_server
from tests.processes import ROOT

MCP_AGENTS = ["demo.agents.support_agent", "tests.mcp.agents.prober"]


def ids(settings, servers, *, deploy=True):
    settings.AGENT = {**settings.AGENT, "AGENTS": MCP_AGENTS, "MCP_SERVERS": servers}
    found = [m.id for m in run_checks(include_deployment_checks=deploy) if m.id]
    return sorted(i for i in found if i.startswith("agent_core.") and "04" in i)


@pytest.fixture
def warehouse(settings):
    return settings.AGENT["MCP_SERVERS"]["warehouse"]


def test_configured_and_annotated_servers_pass(settings, warehouse):
    assert ids(settings, {"warehouse": warehouse, "probe": probe_server()}) == []


def test_an_agent_naming_an_unconfigured_server_is_an_error(settings, warehouse):
    assert ids(settings, {"warehouse": warehouse}) == ["agent_core.E040"]


def test_a_malformed_server_is_an_error(settings, warehouse):
    bad = {"warehouse": warehouse, "probe": {"command": ["x"], "url": "http://x"}}
    assert ids(settings, bad) == ["agent_core.E040"]


def test_a_tool_made_read_against_its_server_is_an_error(settings, warehouse):
    probe = {**probe_server(), "kinds": {"crash": "read", "pid": "read"}}
    messages = ids(settings, {"warehouse": warehouse, "probe": probe})
    assert messages == ["agent_core.E041"]  # crash (no annotations); pid says it is read-only


def test_a_server_whose_tools_carry_no_annotations_is_warned_of(settings, warehouse):
    bare = {"command": [sys.executable, "-m", "tests.mcp.bare_server"], "cwd": str(ROOT)}
    assert ids(settings, {"warehouse": warehouse, "probe": bare}) == ["agent_core.W040"]


def test_a_server_that_is_down_is_warned_of(settings, warehouse):
    down = {"url": f"http://127.0.0.1:{free_port()}/mcp"}
    assert ids(settings, {"warehouse": warehouse, "probe": down}) == ["agent_core.W041"]


def test_the_checks_every_process_runs_contact_no_server(settings, warehouse, tmp_path):
    # A process's start-up checks (a worker's, a test server's) list no server: only --deploy.
    started = tmp_path / "started"
    marks = {"command": [sys.executable, "-c", f"open({str(started)!r}, 'w')"], "cwd": str(ROOT)}
    down = {"url": f"http://127.0.0.1:{free_port()}/mcp"}
    servers = {"warehouse": warehouse, "probe": down, "marks": marks}
    assert ids(settings, servers, deploy=False) == []
    assert not started.exists()
    unconfigured = ids(settings, {"warehouse": warehouse}, deploy=False)
    assert unconfigured == ["agent_core.E040"]  # the configuration is still checked
