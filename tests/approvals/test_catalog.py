"""``GET /agent/tools`` and ``POST /agent/tool-call/skip`` over REST (in process, inline)."""

from __future__ import annotations

import pytest
from django.test import override_settings

from agent_core.choices import CallStatus, RunStatus
from agent_core.models import Message, ToolCall
from approvals.models import DecisionAttempt
from tests.approvals.rest import actor, get
from tests.conftest import calls_of

pytestmark = pytest.mark.django_db

ASK = '/call ask_user {"question": "Which order?"}'


def _tools(person, **params) -> tuple[int, dict]:
    return get(person, "/agent/tools", **params)


def test_an_agents_tools_are_listed_with_how_their_calls_are_decided(people):
    status, data = _tools(people["alice"], agent="support")
    assert status == 200 and data["agent"] == "support"
    by_name = {t["name"]: t for t in data["results"]}
    assert by_name["lookup_order"]["kind"] == "read"
    assert (by_name["lookup_order"]["approval_mode"], by_name["lookup_order"]["requirement"]) == (
        "",
        None,
    )
    assert by_name["ask_user"]["kind"] == "human"
    purge = by_name["purge_cache"]
    assert (purge["kind"], purge["approval_mode"]) == ("action", "blocking")
    assert purge["requirement"] == {
        "required": True,
        "approver": "requester",
        "ttl": None,
        "quorum": 1,
    }
    assert purge["parameters"]["properties"]["path"]
    assert by_name["ask_billing"]["description"]  # a delegate speaks for its agent
    assert (by_name["issue_refund"]["confirm"], purge["confirm"]) == ("token", "")
    follow_up = by_name["schedule_follow_up"]
    assert follow_up["approval_mode"] == "independent"
    assert follow_up["confirmation"].startswith("Email the customer of order {order_id}")


@override_settings(
    APPROVALS={
        "RULES": {
            "purge_cache": {"approver": "ops", "ttl": 600},
            "issue_refund": [{"when": {"amount__lte": 20}, "required": False}, {}],
        }
    }
)
def test_the_requirement_is_shown_only_where_it_does_not_depend_on_the_args(people):
    by_name = {t["name"]: t for t in _tools(people["alice"], agent="support")[1]["results"]}
    assert by_name["purge_cache"]["requirement"] == {
        "required": True,
        "approver": "ops",
        "ttl": 600.0,
        "quorum": 1,
    }
    assert by_name["issue_refund"]["requirement"] is None


def test_an_unknown_or_missing_agent_is_a_clear_error(people):
    status, data = _tools(people["alice"], agent="nobody")
    assert (status, data["code"]) == (404, "agent_not_found")
    status, data = _tools(people["alice"])
    assert (status, data["code"]) == (400, "invalid") and "agent" in data["errors"]


def test_skip_records_rejected_and_tells_the_model_it_was_skipped(turn, people, post):
    me = people["alice"]
    run = turn(ASK, actor=actor(me))
    [call] = calls_of(run)
    url = "/agent/tool-call/skip"
    assert post(people["bob"], url, {"tool_call_id": call.pk})[0] == 404
    status, data = post(me, url, {"tool_call_id": call.pk})
    assert (status, data["status"], data["outcome"]) == (200, "rejected", "applied")
    call.refresh_from_db()
    assert (call.status, call.reason, call.decided_via) == (CallStatus.REJECTED, "skipped", "web")
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    [told] = Message.objects.get(run=run, role="tool").content
    assert told["output"].startswith("The user skipped this question")
    assert post(me, url, {"tool_call_id": call.pk})[1]["outcome"] == "unchanged"
    body = {"tool_call_id": call.pk, "answer": {"answer": "A-1001"}}
    assert post(me, "/agent/tool-call/answer", body)[1]["code"] == "already_answered"
    # Bob's refused attempt, the skip and its repeat.
    assert DecisionAttempt.objects.filter(tool_call_id=call.pk, action="skip").count() == 3


def test_skip_refuses_an_approval_and_an_answered_question(turn, people, post):
    me = people["alice"]
    run = turn('/call purge_cache {"path": "/a"}', actor=actor(me))
    [call] = calls_of(run)
    status, data = post(me, "/agent/tool-call/skip", {"tool_call_id": call.pk})
    assert (status, data["code"]) == (400, "invalid")
    assert ToolCall.objects.get(pk=call.pk).status == CallStatus.PENDING_APPROVAL
    run = turn(ASK, actor=actor(me))
    [call] = calls_of(run)
    post(me, "/agent/tool-call/answer", {"tool_call_id": call.pk, "answer": {"answer": "x"}})
    status, data = post(me, "/agent/tool-call/skip", {"tool_call_id": call.pk})
    assert (status, data["code"]) == (409, "already_answered")
