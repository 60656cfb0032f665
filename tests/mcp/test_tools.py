"""MCP tools in a run (SPEC §18), with real server processes over stdio and streamable HTTP:
reads run on the model's say-so, actions wait for a person and run once after the yes, the
server's errors are tool errors, a server that is down fails the call clearly."""

from __future__ import annotations

import json

from agent_core.agents import get_agent
from agent_core.choices import CallStatus, RunStatus
from approvals import services as port
from tests.conftest import ALICE, calls_of
from tests.mcp.conftest import probe_server, reservations

CHECK = "mcp__warehouse__check_stock"
RESERVE = "mcp__warehouse__reserve_stock"


def call(tool: str, **args: object) -> str:
    return f"/call {tool} {json.dumps(args)}"


def test_the_agent_is_offered_the_servers_tools_with_their_kinds(warehouse):
    support = get_agent("support")
    offered = {t.name: t for t in support.offered_tools()}
    assert offered[CHECK].kind == "read"
    assert offered[RESERVE].kind == "action"
    # The policy finds the server's annotations on the tool.
    assert offered[RESERVE].annotations == {
        "readOnlyHint": False,
        "destructiveHint": False,
        "idempotentHint": False,
        "openWorldHint": False,
    }
    assert offered[RESERVE].parameters_schema["required"] == ["sku", "quantity"]


def test_a_read_tool_runs_without_asking(warehouse, turn):
    run = turn(call(CHECK, sku="SKU-1"))
    [checked] = calls_of(run)
    assert (checked.kind, checked.status) == ("read", CallStatus.SUCCEEDED)
    assert (checked.result or {})["sku"] == "SKU-1"
    assert run.status == RunStatus.COMPLETED


def test_an_action_waits_for_a_person_and_runs_once_after_the_yes(
    warehouse, turn, decide, warehouse_log, reference
):
    run = turn(call(RESERVE, sku="SKU-1", quantity=1, reference=reference))
    [reserve] = calls_of(run)
    assert (reserve.kind, reserve.status) == ("action", CallStatus.PENDING_APPROVAL)
    assert run.status == RunStatus.WAITING
    assert reservations(warehouse_log, reference) == []  # nothing ran before the yes

    decide(port.approve, reserve.pk, actor=ALICE)
    reserve.refresh_from_db()
    assert reserve.status == CallStatus.SUCCEEDED
    assert (reserve.result or {})["quantity"] == 1
    [made] = reservations(warehouse_log, reference)
    assert made["reservation_id"] == (reserve.result or {})["reservation_id"]
    decide(port.approve, reserve.pk, actor=ALICE)  # a second yes changes nothing
    assert len(reservations(warehouse_log, reference)) == 1


def test_the_servers_error_is_a_tool_error(warehouse, turn, decide):
    run = turn(call(RESERVE, sku="SKU-404", quantity=1))
    [reserve] = calls_of(run)
    decide(port.approve, reserve.pk, actor=ALICE)
    reserve.refresh_from_db()
    assert reserve.status == CallStatus.FAILED
    assert "unknown SKU 'SKU-404'" in reserve.error
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED  # the model was told, and answered


def test_a_rejected_action_never_reaches_the_server(
    warehouse, turn, decide, warehouse_log, reference
):
    run = turn(call(RESERVE, sku="SKU-1", quantity=1, reference=reference))
    [reserve] = calls_of(run)
    decide(port.reject, reserve.pk, actor=ALICE, reason="not now")
    reserve.refresh_from_db()
    assert reserve.status == CallStatus.REJECTED
    assert reservations(warehouse_log, reference) == []


def test_a_call_runs_as_the_kind_stamped_when_it_was_proposed(settings, turn, decide):
    # Proposed while the settings made ``pid`` an action; by the time it runs the server's own
    # annotation (read-only) is all there is. It still runs as the action it was approved as:
    # claimed first, so a crash leaves it in doubt instead of running it again.
    agents = [*settings.AGENT["AGENTS"], "tests.mcp.agents.prober"]
    acting = {**probe_server(), "kinds": {"pid": "action"}}
    settings.AGENT = {**settings.AGENT, "AGENTS": agents, "MCP_SERVERS": {"probe": acting}}
    run = turn("/call mcp__probe__pid {}", agent="prober")
    [pid] = calls_of(run)
    assert (pid.kind, pid.status) == ("action", CallStatus.PENDING_APPROVAL)
    settings.AGENT = {**settings.AGENT, "MCP_SERVERS": {"probe": probe_server()}}
    decide(port.approve, pid.pk, actor=ALICE)
    pid.refresh_from_db()
    assert pid.status == CallStatus.SUCCEEDED
    assert pid.attempts == 1 and pid.started_at is not None  # claimed before it ran
