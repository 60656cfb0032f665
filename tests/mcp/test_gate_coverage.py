"""Every side effect gated, provably (SPEC §18): a walk over every tool every configured agent can
reach (what ``manage.py agent tools`` prints) proposes a call of each action tool and checks that
it reached the gate and that nothing ran; then the bypasses the peers had, each by name."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.management import call_command

from agent_core.agents import Agent, get_agent
from agent_core.choices import CallStatus, RunStatus
from agent_core.models import Run, ToolCall
from approvals import coverage
from tests.approvals.rest import client_for
from tests.conftest import REFUND, calls_of
from tests.mcp.conftest import probe_server
from tests.mcp.gates import RecordingGate
from tests.mcp.test_servers import CTX

RAN = (CallStatus.APPROVED, CallStatus.EXECUTING, CallStatus.SUCCEEDED, CallStatus.IN_DOUBT)


@pytest.fixture
def gate(settings: Any) -> Iterator[set[str]]:
    """Every agent of the settings and the tests' probe server; the ids the gate reviewed."""
    settings.AGENT = {
        **settings.AGENT,
        "AGENTS": [*settings.AGENT["AGENTS"], "tests.mcp.agents.prober"],
        "MCP_SERVERS": {**settings.AGENT["MCP_SERVERS"], "probe": probe_server()},
        "APPROVAL_GATE": "tests.mcp.gates.RecordingGate",
    }
    RecordingGate.reviewed.clear()
    yield RecordingGate.reviewed
    RecordingGate.reviewed.clear()


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Give an agent the demo's scripted model (``/call <tool> <json>``) for one test."""

    def use(agent: Agent) -> None:
        monkeypatch.setitem(vars(agent), "model", "scripted:demo")  # frozen: past its __setattr__

    return use


def example(schema: dict[str, Any]) -> Any:
    """Arguments that fit ``schema`` (its required properties, each a plain value)."""
    match schema.get("type"):
        case "object":
            props = schema.get("properties", {})
            return {k: example(props.get(k, {})) for k in schema.get("required", [])}
        case "integer" | "number":
            return 1
        case "boolean":
            return False
        case "array":
            return []
        case _ if schema.get("format") == "date":
            return "2026-12-24"
        case _:
            return "1"  # a string, or a decimal as a string


def test_every_action_tool_of_every_agent_reaches_the_gate(gate, turn, scripted):
    actions = [r for r in coverage.reachable() if r.kind == "action"]
    sources = {r.source.partition(":")[0] for r in actions}
    assert {"python", "mcp"} <= sources  # the walk is not vacuous
    for reach in actions:
        agent = get_agent(reach.agent)
        scripted(agent)
        tool = agent.get_tool(reach.tool)
        run = turn(
            f"/call {tool.name} {json.dumps(example(tool.parameters_schema))}", agent=agent.name
        )
        [call] = calls_of(run)
        if reach.approval_mode == "independent":
            # The turn's call only says a proposal waits: the proposal is the call gated.
            told = call.result or {}
            assert told["executed"] is False, reach
            call = ToolCall.objects.get(pk=told["proposal_id"])
        assert call.kind == "action", reach
        assert call.status not in RAN, reach
        # It reached the gate, or nothing could run it: its own preflight refused it.
        assert call.pk in gate or call.status == CallStatus.REFUSED, (reach, call.status)


def test_manage_py_agent_tools_prints_every_tool_with_its_kind_and_requirement(gate, capsys):
    call_command("agent", "tools")
    out = capsys.readouterr().out
    lines = {tuple(line.split()[:4]) for line in out.splitlines()[1:]}
    for reach in coverage.reachable():
        assert (reach.agent, reach.tool, reach.source, reach.kind) in lines
    assert "mcp__warehouse__reserve_stock  mcp:warehouse" in out
    assert "mcp__probe__crash" in out


# The bypasses of the peers, by name.


def test_a_dynamically_added_tool_is_gated(gate, turn):
    prober = get_agent("prober")
    prober.get_tool("mcp__probe__add_late_tool")(CTX, {})  # the server adds a tool now
    run = turn("/call mcp__probe__late_lookup {}", agent="prober")
    [call] = calls_of(run)
    assert (call.kind, call.status) == ("action", CallStatus.PENDING_APPROVAL)
    assert call.pk in gate


def test_every_action_of_a_toolset_is_gated(gate, turn):
    run = turn("/call mcp__probe__crash {}", agent="prober")  # "mcp:probe": the whole server
    [call] = calls_of(run)
    assert (call.kind, call.status) == ("action", CallStatus.PENDING_APPROVAL)
    assert call.pk in gate
    assert get_agent("prober").get_tool("mcp__probe__pid")(CTX, {})  # the server never crashed


def test_an_agent_used_as_a_tool_keeps_its_own_gate(gate, turn):
    message = '/call issue_refund {"order_id": "A-1001", "amount": 30}'
    parent = turn(f"/call ask_billing {json.dumps({'message': message})}")
    child = Run.objects.get(parent_run=parent)
    [refund] = calls_of(child)
    assert (refund.kind, refund.status) == ("action", CallStatus.PENDING_APPROVAL)
    assert refund.pk in gate
    assert child.status == RunStatus.WAITING


@pytest.mark.parametrize("endpoint", ["chat", "ui-chat"])
def test_the_streaming_chat_endpoints_are_gated(
    gate, people, shop, sync_runner, django_capture_on_commit_callbacks, endpoint
):
    if endpoint == "chat":
        body: dict[str, Any] = {"agent": "support", "message": REFUND}
    else:
        text = {"type": "text", "text": REFUND}
        user = {"id": "m1", "role": "user", "parts": [text]}
        body = {"id": "chat-1", "messages": [user], "trigger": "submit-message"}
        body["agent"] = "support"
    with django_capture_on_commit_callbacks(execute=True):
        response = client_for(people["alice"]).post(f"/agent/{endpoint}", body, format="json")
    assert response.status_code in (200, 202)
    [call] = ToolCall.objects.all()
    assert (call.kind, call.status) == ("action", CallStatus.PENDING_APPROVAL)
    assert call.pk in gate
