"""Decisions, the pending inbox and remembered grants over REST (DRF APIClient, in process)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from agent_core.choices import SYSTEM_VIAS, CallStatus, RunStatus
from agent_core.engine import runs
from agent_core.engine import sql as agent_sql
from agent_core.models import StreamFrame, ToolCall
from approvals import services as port
from approvals import sql as approvals_sql
from approvals.checks import check_api_not_shadowed, check_requester_is_no_role
from approvals.exceptions import InvalidDecision
from approvals.models import DecisionAttempt, RememberedApproval
from demo.models import Refund
from tests.approvals.rest import actor, client_for, get
from tests.conftest import calls_of, refund
from tests.factories import make_user

pytestmark = pytest.mark.django_db


# --- decisions -----------------------------------------------------------------------------------


def test_approve_then_repeat_then_conflict(turn, people, post):
    run = turn(refund(10), actor=actor(people["alice"]))
    [call] = calls_of(run)
    body = {"tool_call_id": call.pk, "via": "slack"}
    assert post(people["alice"], "/agent/tool-call/approve", body) == (
        200,
        {"tool_call_id": call.pk, "status": "approved", "outcome": "applied", "expires_at": None},
    )
    status, data = post(people["alice"], "/agent/tool-call/approve", body)
    assert (status, data["outcome"]) == (200, "unchanged")
    status, data = post(people["alice"], "/agent/tool-call/reject", {"tool_call_id": call.pk})
    assert (status, data["code"]) == (409, "already_decided")
    call.refresh_from_db()
    assert (call.decided_by_ref, call.decided_via) == (f"user:{people['alice'].pk}", "slack")
    assert Refund.objects.count() == 1


def test_an_approval_takes_one_statement_per_thing_it_does(turn, people):
    """The decision path's statements (issue 18), over token authentication: the token with its
    user and roles; the run and the call locked and read with the call's quorum; the
    compare-and-set with the stream frame and the audit row, which resumes the run it frees and
    returns the run's other open calls. The answer is the call as the decision left it: nothing
    is read again."""
    run = turn(refund(10), actor=actor(people["alice"]))
    [call] = calls_of(run)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=people['alice']).key}")
    with CaptureQueriesContext(connection) as queries:
        response = client.post("/agent/tool-call/approve", {"tool_call_id": call.pk}, format="json")
    assert response.json()["status"] == "approved"
    statements = [q["sql"] for q in queries.captured_queries if "SAVEPOINT" not in q["sql"]]
    assert len(statements) == 3, statements
    assert "authtoken_token" in statements[0]
    locking = approvals_sql.LOCK_CALL_WITH_QUORUM.split("%(call_id)s")
    assert statements[1].startswith(locking[0]) and statements[1].endswith(locking[1])
    assert statements[2].startswith(approvals_sql.SETTLE_AUDITED.split("%(")[0])
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED  # waiting → queued: none waits (the test drives none)
    assert DecisionAttempt.objects.get().outcome == "applied"
    [frame] = StreamFrame.objects.filter(run=run, kind="approval-settled")
    assert frame.data["decided_by"] == f"user:{people['alice'].pk}"


def test_the_audited_settlement_is_the_settlement_with_its_audit_row_first():
    """Both statements are written out whole: they may not drift apart."""
    audited = approvals_sql.SETTLE_AUDITED
    audit = audited[: audited.index(" c AS (UPDATE")]
    assert audited == audit + agent_sql.SETTLE_CALL.removeprefix("WITH")
    assert approvals_sql.AUDIT_ATTEMPT.split(" VALUES")[0] in audit


@override_settings(APPROVALS={"RULES": {"issue_refund": {"approver": "finance", "ttl": 600}}})
def test_refusals_have_their_status_and_code_and_are_audited(turn, people, post):
    run = turn(refund(10), actor=actor(people["alice"]))
    [call] = calls_of(run)
    url = "/agent/tool-call/approve"
    assert post(None, url, {"tool_call_id": call.pk})[0] == 401
    assert post(people["alice"], url, {"tool_call_id": call.pk})[1]["code"] == "not_approver"
    # bob cannot even see the call: unknown, like an id that does not exist (SPEC §7)
    assert post(people["bob"], url, {"tool_call_id": call.pk})[1]["code"] == "not_found"
    assert post(people["fran"], url, {"tool_call_id": "tc_nope"})[0] == 404
    ToolCall.objects.filter(pk=call.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    status, data = post(people["fran"], url, {"tool_call_id": call.pk})
    assert (status, data["code"]) == (410, "approval_expired")
    outcomes = list(DecisionAttempt.objects.order_by("id").values_list("action", "outcome"))
    assert outcomes == [
        ("approve", "not_approver"),
        ("approve", "not_found"),
        ("approve", "not_found"),
        ("expire", "applied"),
        ("approve", "approval_expired"),
    ]


def test_a_dead_runs_card_answers_run_not_active(turn, people, post):
    run = turn(refund(10), actor=actor(people["alice"]))
    [call] = calls_of(run)
    runs.fail_run(run.pk, code="run_failed", message="gone")
    status, data = post(people["alice"], "/agent/tool-call/approve", {"tool_call_id": call.pk})
    assert (status, data["code"]) == (409, "run_not_active")


_REQUIRED: dict[str, dict[str, Any]] = {
    "approve": {},
    "reject": {},
    "answer": {"answer": "x"},
    "extend": {"ttl": 60},
}


@pytest.mark.parametrize(
    ("url", "body", "field"),
    [
        ("/agent/tool-call/approve", {}, "tool_call_id"),
        ("/agent/tool-call/approve", {"via": ""}, "via"),
        ("/agent/tool-call/approve", {"via": "x" * 65}, "via"),
        ("/agent/tool-call/approve", {"remember": "yes"}, "remember"),
        ("/agent/tool-call/approve", {"remember": 1}, "remember"),
        ("/agent/tool-call/approve", {"args": ["A-1001", 5]}, "args"),
        ("/agent/tool-call/reject", {"reason": "x" * 4097}, "reason"),
        ("/agent/tool-call/answer", {}, "answer"),
        ("/agent/tool-call/extend", {}, "non_field_errors"),
        ("/agent/tool-call/extend", {"ttl": 0}, "ttl"),
        ("/agent/tool-call/extend", {"ttl": 60, "expires_at": "2030-01-01T00:00:00Z"}, None),
        *[
            (f"/agent/tool-call/{action}", {"via": via, **extra}, "via")
            for via in sorted(SYSTEM_VIAS)
            for action, extra in _REQUIRED.items()
        ],
    ],
)
def test_invalid_bodies_are_400_and_change_nothing(turn, people, post, url, body, field):
    run = turn(refund(10), actor=actor(people["alice"]))
    [call] = calls_of(run)
    full = {"tool_call_id": call.pk, **body} if field != "tool_call_id" else body
    status, data = post(people["alice"], url, full)
    assert (status, data["code"]) == (400, "invalid")
    assert field is None or field in data["errors"]
    call.refresh_from_db()
    assert call.status == CallStatus.PENDING_APPROVAL and DecisionAttempt.objects.count() == 0


@pytest.mark.parametrize("via", sorted(SYSTEM_VIAS))
def test_the_port_refuses_the_systems_own_vias_before_auditing(turn, people, via):
    run = turn(refund(10), actor=actor(people["alice"]))
    [call] = calls_of(run)
    with pytest.raises(InvalidDecision):
        port.approve(call.pk, actor=actor(people["alice"]), via=via)
    call.refresh_from_db()
    assert call.status == CallStatus.PENDING_APPROVAL and DecisionAttempt.objects.count() == 0


def test_edited_args_over_rest(turn, people, post):
    run = turn(refund(50), actor=actor(people["alice"]))
    [call] = calls_of(run)
    url, me = "/agent/tool-call/approve", people["alice"]
    bad = {"tool_call_id": call.pk, "args": {"order_id": "A-1001", "amount": "lots"}}
    status, data = post(me, url, bad)
    assert (status, data["code"]) == (400, "invalid")
    assert data["errors"][0]["loc"] == ["amount"]
    good = {"tool_call_id": call.pk, "args": {"order_id": "A-1001", "amount": 20}}
    assert post(me, url, good)[1]["status"] == "approved"
    assert Refund.objects.get().amount == 20


# The policy guide's refund rules (docs/howto/policy.md): small ones run, large ones need
# finance, the rest the requester.
REFUND_TIERS = {
    "RULES": {
        "issue_refund": [
            {"when": {"amount__lte": 20}, "required": False},
            {"when": {"amount__gt": 100}, "approver": "finance"},
            {"approver": "requester"},
        ]
    }
}


@override_settings(APPROVALS=REFUND_TIERS)
def test_edited_args_that_need_another_approver_are_refused_and_audited(turn, people, post):
    """Issue #12: alice may approve her own refund of 50, not turn it into one of 15,000."""
    run = turn(refund(50), actor=actor(people["alice"]))
    [call] = calls_of(run)
    url, me = "/agent/tool-call/approve", people["alice"]
    bigger = {"tool_call_id": call.pk, "args": {"order_id": "A-1001", "amount": 15000}}
    status, data = post(me, url, bigger)
    assert (status, data["code"]) == (403, "edit_needs_approver")
    assert "finance" in data["detail"]
    call.refresh_from_db()
    assert call.status == CallStatus.PENDING_APPROVAL and call.original_args is None
    assert DecisionAttempt.objects.get().outcome == "edit_needs_approver"
    smaller = {"tool_call_id": call.pk, "args": {"order_id": "A-1001", "amount": 30}}
    assert post(me, url, smaller)[1]["status"] == "approved"
    assert Refund.objects.get().amount == 30


def test_under_the_demo_policy_finance_may_edit_a_refund_within_its_rule(
    turn, people, post, settings
):
    """The demo's refund rule (under 20: nobody; else finance): finance edits within it; the
    requester, who may not approve refunds at all, gets 403 whatever the edit."""
    settings.AGENT = {**settings.AGENT, "APPROVAL_POLICY": "demo.policy.DemoPolicy"}
    run = turn(refund(120), actor=actor(people["alice"]))
    [call] = calls_of(run)
    assert call.approver == "finance"
    url = "/agent/tool-call/approve"
    edited = {"tool_call_id": call.pk, "args": {"order_id": "A-1001", "amount": 15}}
    assert post(people["alice"], url, edited)[:1] == (403,)
    assert post(people["fran"], url, edited)[1]["status"] == "approved"
    assert Refund.objects.get().amount == 15


def test_answer_over_rest(turn, people, post):
    run = turn('/call ask_user {"question": "Which order?"}', actor=actor(people["alice"]))
    [call] = calls_of(run)
    url, me = "/agent/tool-call/answer", people["alice"]
    status, data = post(me, url, {"tool_call_id": call.pk, "answer": {"answer": ""}})
    assert (status, data["code"]) == (400, "invalid") and data["errors"]
    assert post(people["bob"], url, {"tool_call_id": call.pk, "answer": {"answer": "x"}})[0] == 404
    status, data = post(me, url, {"tool_call_id": call.pk, "answer": {"answer": "A-1001"}})
    assert (status, data["status"], data["outcome"]) == (200, "succeeded", "applied")
    status, data = post(me, url, {"tool_call_id": call.pk, "answer": {"answer": "A-1002"}})
    assert (status, data["code"]) == (409, "already_answered")


@override_settings(APPROVALS={"RULES": {"*": {"ttl": 60}}, "MAX_EXTENSION": {"*": 7200}})
def test_extend_over_rest(turn, people, post):
    run = turn(refund(10), actor=actor(people["alice"]))
    [call] = calls_of(run)
    for body in ({"ttl": 7300}, {"expires_at": "9999-12-31T00:00:00Z"}):
        status, data = post(
            people["alice"], "/agent/tool-call/extend", {"tool_call_id": call.pk, **body}
        )
        assert (status, data["code"]) == (400, "invalid"), data
    status, data = post(
        people["bob"], "/agent/tool-call/extend", {"tool_call_id": call.pk, "ttl": 3600}
    )
    assert (status, data["code"]) == (404, "not_found")  # bob cannot see the call
    status, data = post(
        people["alice"], "/agent/tool-call/extend", {"tool_call_id": call.pk, "ttl": 3600}
    )
    assert (status, data["status"], data["outcome"]) == (200, "pending_approval", "applied")
    call.refresh_from_db()
    assert call.expires_at is not None and call.expires_at > timezone.now() + timedelta(minutes=50)
    assert data["expires_at"] == call.expires_at.isoformat().replace("+00:00", "Z")


# --- remembered grants ---------------------------------------------------------------------------


def test_remembered_grants_are_listed_and_revoked_over_rest(turn, people, post):
    alice, bob = people["alice"], people["bob"]
    first = turn(refund(10), actor=actor(alice))
    post(
        alice, "/agent/tool-call/approve", {"tool_call_id": calls_of(first)[0].pk, "remember": True}
    )
    grant = RememberedApproval.objects.get()
    status, data = get(alice, "/agent/remembered")
    assert status == 200 and [g["id"] for g in data] == [grant.pk] and data[0]["active"]
    assert get(bob, f"/agent/remembered/{grant.pk}")[0] == 404
    assert client_for(bob).delete(f"/agent/remembered/{grant.pk}").status_code == 404
    assert client_for(alice).delete(f"/agent/remembered/{grant.pk}").status_code == 204
    assert client_for(alice).delete(f"/agent/remembered/{grant.pk}").status_code == 204
    assert get(alice, "/agent/remembered")[1] == []
    status, data = get(alice, f"/agent/remembered/{grant.pk}")
    assert (data["active"], data["revoked_by_ref"]) == (False, f"user:{alice.pk}")
    assert [g["id"] for g in get(alice, "/agent/remembered", all=1)[1]] == [grant.pk]
    again = turn(refund(11), actor=actor(alice), thread_id=first.thread_id)
    assert calls_of(again)[0].status == CallStatus.PENDING_APPROVAL


def test_decisions_accept_json_only(people):
    response = client_for(people["alice"]).post(
        "/agent/tool-call/approve", {"tool_call_id": "tc_x"}, format="multipart"
    )
    assert response.status_code == 415
    assert response.json()["code"] == "unsupported_media_type"


# --- the requester marker is no role (issue #12, defect 6) ---------------------------------------


def test_a_group_named_requester_sees_nobody_elses_runs_and_the_check_refuses_it(turn, people):
    run = turn('/call purge_cache {"path": "/"}', actor=actor(people["alice"]))
    [call] = calls_of(run)
    assert call.approver == "requester"
    mallory = make_user("mallory", "requester")
    client = client_for(mallory)
    assert client.get(f"/agent/runs/{run.pk}").status_code == 404
    assert client.get(f"/agent/threads/{run.thread_id}").status_code == 404
    assert client.get("/agent/runs").json()["results"] == []
    status = client.post("/agent/tool-call/approve", {"tool_call_id": call.pk}, format="json")
    assert status.status_code == 404
    assert [e.id for e in check_requester_is_no_role(databases=["default"])] == ["approvals.E004"]
    assert check_requester_is_no_role() == []  # without a database, groups are not read
    with override_settings(AGENT={"AGENTS": [], "OPERATOR_ROLE": "requester"}):
        assert [e.id for e in check_requester_is_no_role()] == ["approvals.E004"]


def test_the_check_reports_the_approvals_api_hidden_behind_the_catch_all():
    assert check_api_not_shadowed() == []
    with override_settings(ROOT_URLCONF="tests.approvals.wrong_order_urls"):
        assert [e.id for e in check_api_not_shadowed()] == ["approvals.E003"]
