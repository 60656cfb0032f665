"""The loop end to end with the demo agent and the scripted demo model (in process)."""

from __future__ import annotations

import json

import pytest

from agent_core.choices import CallStatus, RunStatus
from agent_core.exceptions import RunActive
from agent_core.models import Message, Run, Step, StreamFrame, Thread
from approvals import services as port
from demo.models import CachePurge, Refund
from tests.conftest import ALICE, REFUND, calls_of

pytestmark = pytest.mark.django_db


def frames(run: Run) -> list[str]:
    return list(StreamFrame.objects.filter(run=run).order_by("seq").values_list("kind", flat=True))


def test_a_plain_message_gets_a_text_answer(turn):
    run = turn("hello there")
    assert run.status == RunStatus.COMPLETED
    last = Message.objects.filter(thread=run.thread).latest("seq")
    assert last.role == "assistant" and "look up orders" in last.text
    assert frames(run)[0] == "step-start" and frames(run)[-1] == "finish"
    assert Thread.objects.get(pk=run.thread_id).active_run is None


def test_a_read_tool_runs_without_asking(turn):
    run = turn('/call lookup_order {"order_id": "A-1001"}')
    assert run.status == RunStatus.COMPLETED
    [call] = calls_of(run)
    assert call.kind == "read" and call.status == CallStatus.SUCCEEDED
    assert (call.result or {}).get("customer_email") == "maria@example.com"
    assert call.attempts == 1
    final = Message.objects.filter(thread=run.thread).latest("seq")
    assert "lookup_order returned" in final.text
    assert list(Step.objects.filter(run=run).values_list("name", flat=True)) == [
        "llm:0",
        f"tool:{call.pk}",
        "llm:1",
    ]


def test_an_action_call_waits_for_a_person(turn):
    run = turn('/call issue_refund {"order_id": "A-1001", "amount": 10}')
    assert run.status == RunStatus.WAITING
    assert run.lease_owner == "" and run.lease_expires_at is None
    [call] = calls_of(run)
    assert call.status == CallStatus.PENDING_APPROVAL
    assert call.kind == "action" and call.requires_approval and call.approver == "requester"
    assert call.requester_ref == ALICE.ref
    assert Refund.objects.count() == 0
    kinds = frames(run)
    assert kinds.index("tool-input-available") < kinds.index("approval-requested")
    assert kinds[-1] == "step-finish"


def test_approve_runs_the_call_exactly_once_and_completes(turn, decide):
    run = turn('/call issue_refund {"order_id": "A-1001", "amount": 10}')
    [call] = calls_of(run)
    assert decide(port.approve, call.pk, actor=ALICE).result == port.Result.APPLIED
    run.refresh_from_db()
    call.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert call.status == CallStatus.SUCCEEDED and call.attempts == 1
    assert call.decided_by_ref == ALICE.ref and call.decided_via == "web"
    assert Refund.objects.filter(tool_call_id=call.pk).count() == 1
    assert decide(port.approve, call.pk, actor=ALICE).result == port.Result.UNCHANGED
    assert Refund.objects.count() == 1
    kinds = frames(run)
    order = ["approval-requested", "approval-settled", "tool-output", "finish"]
    assert [k for k in kinds if k in order] == order


def test_reject_feeds_the_reason_to_the_model_and_nothing_runs(turn, decide):
    run = turn('/call purge_cache {"path": "/products"}')
    [call] = calls_of(run)
    decide(port.reject, call.pk, actor=ALICE, reason="not during the sale")
    run.refresh_from_db()
    call.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert call.status == CallStatus.REJECTED and call.reason == "not during the sale"
    assert CachePurge.objects.count() == 0
    tool_message = Message.objects.get(thread=run.thread, role="tool")
    [part] = tool_message.content
    assert part["is_error"] and "not during the sale" in part["output"]
    assert "did not run" in part["output"]
    final = Message.objects.filter(thread=run.thread).latest("seq")
    assert "not during the sale" in final.text
    assert "tool-output-denied" in frames(run)


@pytest.mark.parametrize("order", [(0, 1), (1, 0)])
def test_two_action_calls_in_one_step_decided_in_either_order(turn, decide, order):
    run = turn(
        '/call issue_refund {"order_id": "A-1001", "amount": 5}\n'
        '/call purge_cache {"path": "/orders"}'
    )
    calls = calls_of(run)
    assert [c.status for c in calls] == [CallStatus.PENDING_APPROVAL] * 2
    first, second = (calls[i] for i in order)
    decide(port.approve, first.pk, actor=ALICE)
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING  # the other one still waits
    assert Refund.objects.count() == 0 and CachePurge.objects.count() == 0
    decide(port.approve, second.pk, actor=ALICE)
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert Refund.objects.count() == 1 and CachePurge.objects.count() == 1
    assert [c.status for c in calls_of(run)] == [CallStatus.SUCCEEDED] * 2
    [results] = Message.objects.filter(thread=run.thread, role="tool")
    assert [p["tool_name"] for p in results.content] == ["issue_refund", "purge_cache"]


def test_unknown_tools_and_invalid_args_become_errors_the_model_sees(turn):
    run = turn(
        "/call drop_database {}\n"
        '/call issue_refund {"order_id": "A-1001", "amount": -3}\n'
        "/call lookup_order not json"
    )
    assert run.status == RunStatus.COMPLETED
    unknown, invalid, garbled = calls_of(run)
    assert unknown.status == CallStatus.FAILED and "tool_not_found" in unknown.error
    assert invalid.status == CallStatus.FAILED and "invalid arguments" in invalid.error
    assert garbled.status == CallStatus.FAILED and garbled.args == {"_raw": "not json"}
    assert Refund.objects.count() == 0
    assert frames(run).count("tool-output-error") == 3
    [results] = Message.objects.filter(thread=run.thread, role="tool")
    assert all(p["is_error"] for p in results.content)


def test_a_nul_in_proposed_args_is_a_tool_error_not_a_failed_run(turn):
    # The message holds the six characters \u0000; the model's JSON decodes them to a NUL.
    run = turn('/call lookup_order {"order_id": "A-1001\\u0000"}')
    assert run.status == RunStatus.COMPLETED
    [call] = calls_of(run)
    assert call.status == CallStatus.FAILED and "NUL" in call.error and call.args == {}
    assert "tool-output-error" in frames(run)


def test_a_second_turn_on_a_busy_thread_is_refused(turn):
    run = turn('/call purge_cache {"path": "/"}')
    with pytest.raises(RunActive):
        turn("and another thing", thread_id=run.thread_id)
    assert Run.objects.filter(thread=run.thread).count() == 1
    assert Message.objects.filter(thread=run.thread, role="user").count() == 1


def test_a_second_turn_sees_the_whole_transcript(turn, decide):
    first = turn('/call lookup_order {"order_id": "A-1002"}')
    second = turn("hello again", thread_id=first.thread_id)
    assert second.status == RunStatus.COMPLETED
    roles = list(
        Message.objects.filter(thread=first.thread).order_by("seq").values_list("role", flat=True)
    )
    assert roles == ["user", "assistant", "tool", "assistant", "user", "assistant"]


def test_edited_args_run_and_the_model_is_told(turn, decide):
    run = turn('/call issue_refund {"order_id": "A-1001", "amount": 50}')
    [call] = calls_of(run)
    decide(port.approve, call.pk, actor=ALICE, args={"order_id": "A-1001", "amount": 20})
    call.refresh_from_db()
    assert call.original_args == {"order_id": "A-1001", "amount": "50", "reason": ""}
    assert Refund.objects.get().amount == 20
    results = Message.objects.get(thread=run.thread, role="tool").content[0]
    assert "edited arguments" in json.dumps(results["output"])


def test_a_step_that_cannot_open_keeps_the_record_of_the_tool_before_it(turn, decide, settings):
    # The inline driver opens the next model step in the transaction that records the tool;
    # here that opening fails (the step budget is spent). The effect and its record stand.
    settings.AGENT = {**settings.AGENT, "MAX_STEPS_PER_RUN": 1}
    run = turn(REFUND)
    [call] = calls_of(run)
    decide(port.approve, call.pk, actor=ALICE)
    run.refresh_from_db()
    call.refresh_from_db()
    assert run.status == RunStatus.FAILED and run.error_code == "run_limit_exceeded"
    assert call.status == CallStatus.SUCCEEDED and call.attempts == 1
    assert Refund.objects.filter(tool_call_id=call.pk).count() == 1
    assert Step.objects.filter(run=run, name=f"tool:{call.pk}").exists()
    assert frames(run)[-2:] == ["tool-output", "finish"]
