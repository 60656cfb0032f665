"""The MCP connections of a process (``agent_core.mcp``) against real server processes: a stdio
server is started once per process, a crashed or hung one fails the call clearly and is started
again for the next call, a server that is down fails calls without holding anything, and a tool
that appears on a server later is an action whatever it claims."""

from __future__ import annotations

import pytest

from agent_core.agents import Agent
from agent_core.exceptions import McpUnavailable, ToolNotFound
from agent_core.mcp.catalog import McpToolError
from agent_core.tools import ToolContext
from tests.conftest import ALICE
from tests.mcp.conftest import free_port, probe_server

CTX = ToolContext(
    run_id="run_x", thread_id="thr_x", tool_call_id="tc_x", actor=ALICE, idempotency_key="k"
)


@pytest.fixture
def probe(settings):
    settings.AGENT = {**settings.AGENT, "MCP_SERVERS": {"probe": probe_server()}}
    return Agent(name="prober", tools=("mcp:probe",))


def run(agent: Agent, tool: str, **args: object) -> object:
    return agent.get_tool(f"mcp__probe__{tool}")(CTX, args)


def test_a_stdio_server_is_started_once_per_process(probe):
    first = run(probe, "pid")
    assert run(probe, "pid") == first
    assert (
        Agent(name="other", tools=("mcp:probe/pid",)).get_tool("mcp__probe__pid")(CTX, {}) == first
    )


def test_a_server_that_crashes_mid_call_fails_the_call_and_is_started_again(probe):
    before = run(probe, "pid")
    with pytest.raises(McpUnavailable, match=r"'probe' failed during the call .*unknown"):
        run(probe, "crash")
    after = run(probe, "pid")
    assert after != before


def test_a_call_past_the_servers_timeout_fails_and_the_next_one_works(probe):
    with pytest.raises(McpUnavailable, match="'probe' failed during the call"):
        run(probe, "hang", seconds=30)
    assert run(probe, "hang", seconds=0) == {"result": "late"}  # structured content


def test_a_server_that_is_down_fails_clearly_and_offers_nothing(settings):
    settings.AGENT = {
        **settings.AGENT,
        "MCP_SERVERS": {
            "gone": {"url": f"http://127.0.0.1:{free_port()}/mcp", "connect_timeout": 2},
            "missing": {"command": ["/nonexistent/airlock-mcp-server"]},
        },
    }
    agent = Agent(name="stranded", tools=("mcp:gone", "mcp:missing", "mcp:unconfigured"))
    assert agent.offered_tools() == []
    with pytest.raises(ToolNotFound, match="MCP server 'gone' is unavailable"):
        agent.get_tool("mcp__gone__anything")
    with pytest.raises(ToolNotFound, match="MCP server 'missing' is unavailable"):
        agent.get_tool("mcp__missing__anything")


def test_a_tool_that_appears_later_is_an_action_whatever_it_claims(probe, settings):
    kinds = {t.name: t.kind for t in probe.offered_tools()}
    assert kinds["mcp__probe__pid"] == "read"
    assert kinds["mcp__probe__crash"] == "action"  # no annotations: an action
    run(probe, "add_late_tool")
    late = probe.get_tool("mcp__probe__late_lookup")
    assert late.annotations["readOnlyHint"] is True
    assert late.kind == "action"
    # ... until the settings say otherwise (other settings: a server of their own).
    configured = {**probe_server(), "kinds": {"late_lookup": "read"}}
    settings.AGENT = {**settings.AGENT, "MCP_SERVERS": {"probe": configured}}
    run(probe, "add_late_tool")
    assert probe.get_tool("mcp__probe__late_lookup").kind == "read"


def test_only_the_named_tool_of_a_source_is_offered(probe):
    agent = Agent(name="narrow", tools=("mcp:probe/pid",))
    assert [t.name for t in agent.offered_tools()] == ["mcp__probe__pid"]
    with pytest.raises(ToolNotFound):
        agent.get_tool("mcp__probe__crash")


def test_a_protocol_error_is_a_tool_error(probe):
    with pytest.raises(McpToolError):
        run(probe, "hang", seconds="not a number")
