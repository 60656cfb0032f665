"""MCP tools in a run (SPEC §18), with real server processes over stdio and streamable HTTP:
reads run on the model's say-so, actions wait for a person and run once after the yes, the
server's errors are tool errors, a server that is down fails the call clearly."""

from __future__ import annotations

import json
from dataclasses import replace

from agent_core.agents import get_agent
from agent_core.choices import CallStatus, RunStatus
from approvals import services as port
from tests.conftest import ALICE, calls_of
from tests.mcp.conftest import reservations

CHECK = "mcp__warehouse__check_stock"
RESERVE = "mcp__warehouse__reserve_stock"
STAMPER = "tests.mcp.agents.stamper"


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


def test_a_call_runs_as_the_kind_stamped_when_it_was_proposed(settings, turn, decide, monkeypatch):
    # Proposed as an action; by the time it runs, its tool says it is a read (an MCP server's
    # annotations changed, a deploy). It still runs as the action it was approved as: claimed
    # (``executing``) before it runs, so a crash leaves it in doubt instead of running it again.
    settings.AGENT = {**settings.AGENT, "AGENTS": [*settings.AGENT["AGENTS"], STAMPER]}
    run = turn("/call observe {}", agent="stamper")
    [call] = calls_of(run)
    assert (call.kind, call.status) == ("action", CallStatus.PENDING_APPROVAL)
    stamper = get_agent("stamper")
    now_read = replace(stamper.get_tool("observe"), kind="read")
    monkeypatch.setitem(stamper._by_name, "observe", now_read)
    decide(port.approve, call.pk, actor=ALICE)
    call.refresh_from_db()
    assert (call.status, call.result) == (CallStatus.SUCCEEDED, {"seen": "executing"})
