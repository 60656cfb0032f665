"""Decisions, the pending inbox and remembered grants over REST (DRF APIClient, in process)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.db.models import Q
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from agent_core import runs
from agent_core.actors import Actor, actor_for_user
from agent_core.choices import SYSTEM_VIAS, CallStatus
from agent_core.models import StreamFrame, ToolCall
from approvals import services as port
from approvals import sql as approvals_sql
from approvals.checks import check_api_not_shadowed, check_requester_is_no_role
from approvals.exceptions import InvalidDecision
from approvals.models import DecisionAttempt, RememberedApproval
from approvals.policy import DefaultPolicy
from demo.models import Refund
from tests.conftest import calls_of
from tests.factories import make_user

pytestmark = pytest.mark.django_db


def refund(amount: int) -> str:
    return f'/call issue_refund {{"order_id": "A-1001", "amount": {amount}}}'


def client_for(person: User | None) -> APIClient:
    client = APIClient()
    if person is not None:
        client.force_authenticate(person)
    return client


def actor(person: User) -> Actor:
    return actor_for_user(person)


@pytest.fixture
def post(django_capture_on_commit_callbacks):
    """POST as ``person`` and let the run the decision resumes be driven before returning."""

    def call(person: User | None, url: str, body: dict) -> tuple[int, dict]:
        with django_capture_on_commit_callbacks(execute=True):
            response = client_for(person).post(url, body, format="json")
        return response.status_code, response.json()

    return call


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
    compare-and-set with the stream frame and the audit row, which returns the run's other open
    calls; the run resumed. The answer is the call as the decision left it: nothing is read
    again."""
    run = turn(refund(10), actor=actor(people["alice"]))
    [call] = calls_of(run)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=people['alice']).key}")
    with CaptureQueriesContext(connection) as queries:
        response = client.post("/agent/tool-call/approve", {"tool_call_id": call.pk}, format="json")
    assert response.json()["status"] == "approved"
    statements = [q["sql"] for q in queries.captured_queries if "SAVEPOINT" not in q["sql"]]
    assert len(statements) == 4, statements
    assert "authtoken_token" in statements[0]
    locking = approvals_sql.LOCK_CALL_WITH_QUORUM.split("%s")
    assert statements[1].startswith(locking[0]) and statements[1].endswith(locking[1])
    assert statements[2].startswith(approvals_sql.SETTLE_AUDITED.split("%s")[0])
    assert statements[3].startswith('UPDATE "agent_core_run"')  # waiting → queued: none waits
    assert DecisionAttempt.objects.get().outcome == "applied"
    [frame] = StreamFrame.objects.filter(run=run, kind="approval-settled")
    assert frame.data["decided_by"] == f"user:{people['alice'].pk}"


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


# The README's refund rules: small ones run, large ones need finance, the rest the requester.
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


# --- the pending inbox ---------------------------------------------------------------------------

FINANCE_ABOVE_100 = {
    "RULES": {"issue_refund": {"when": {"amount__gt": 100}, "approver": "finance"}}
}


def get(person: User, url: str, **params) -> tuple[int, dict]:
    response = client_for(person).get(url, params)
    return response.status_code, response.json()


@override_settings(APPROVALS=FINANCE_ABOVE_100)
def test_the_inbox_lists_what_the_actor_may_decide_across_threads(turn, people):
    alice, bob, fran = people["alice"], people["bob"], people["fran"]
    big = calls_of(turn(refund(150), actor=actor(alice)))[0]
    small = calls_of(turn(refund(50), actor=actor(alice)))[0]
    bobs_big = calls_of(turn(refund(300), actor=actor(bob)))[0]
    question = calls_of(turn('/call ask_user {"question": "Why?"}', actor=actor(alice)))[0]
    ids = lambda data: [r["tool_call_id"] for r in data["results"]]  # noqa: E731
    assert ids(get(fran, "/agent/approvals/pending")[1]) == [big.pk, bobs_big.pk]
    assert ids(get(alice, "/agent/approvals/pending")[1]) == [small.pk, question.pk]
    assert ids(get(bob, "/agent/approvals/pending")[1]) == []
    [row] = get(fran, "/agent/approvals/pending", thread=bobs_big.thread_id)[1]["results"]
    assert row == {
        "tool_call_id": bobs_big.pk,
        "status": "pending_approval",
        "tool_name": "issue_refund",
        "kind": "action",
        "args": {"order_id": "A-1001", "amount": "300", "reason": ""},
        "confirmation": "",
        "summary": "Refund 300.00 on order A-1001 — maria@example.com, order total 59.90",
        "approver": "finance",
        "requester": f"user:{bob.pk}",
        "thread_id": bobs_big.thread_id,
        "run_id": bobs_big.run_id,
        "agent": "support",
        "requested_at": row["requested_at"],
        "expires_at": None,
        "answer_schema": None,
        "approvals": [],
        "approvals_needed": 1,
        "chain": ["support"],
    }
    q = get(alice, "/agent/approvals/pending", tool="ask_user")[1]["results"][0]
    assert q["answer_schema"]["required"] == ["answer"]
    assert ids(get(alice, "/agent/approvals/pending", approver="requester")[1]) == [small.pk]
    assert ids(get(fran, "/agent/approvals/pending", agent="support")[1]) == [big.pk, bobs_big.pk]
    assert ids(get(fran, "/agent/approvals/pending", agent="ops")[1]) == []
    assert ids(get(fran, "/agent/approvals/pending", tool="purge_cache")[1]) == []
    # Decided calls leave the inbox.
    runs.fail_run(big.run_id, code="run_failed", message="gone")
    assert ids(get(fran, "/agent/approvals/pending")[1]) == [bobs_big.pk]
    assert client_for(None).get("/agent/approvals/pending").status_code == 401


def test_the_inbox_pages_with_a_cursor_in_one_query(turn, people, django_assert_num_queries):
    alice = people["alice"]
    made = [calls_of(turn(refund(10 + i), actor=actor(alice)))[0].pk for i in range(7)]
    # Same requested_at for two calls: the id breaks the tie, so no page repeats or skips one.
    ToolCall.objects.filter(pk__in=made[2:4]).update(requested_at=timezone.now())
    expected = list(
        ToolCall.objects.filter(pk__in=made)
        .order_by("requested_at", "id")
        .values_list("pk", flat=True)
    )
    seen: list[str] = []
    cursor = None
    client = client_for(alice)
    while True:
        params = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        # One query for the actor's roles (the resolver), one for the page: never one per row.
        with django_assert_num_queries(2):
            data = client.get("/agent/approvals/pending", params).json()
        seen += [r["tool_call_id"] for r in data["results"]]
        cursor = data["next_cursor"]
        if cursor is None:
            assert data["next"] is None
            break
        assert f"cursor={cursor}" in data["next"]
    assert seen == expected


@override_settings(APPROVALS=FINANCE_ABOVE_100)
def test_the_inbox_sorts_by_deadline_searches_and_filters_by_requester(turn, people):
    alice, bob, fran = people["alice"], people["bob"], people["fran"]
    first, second, third = (
        calls_of(turn(refund(amount), actor=actor(who)))[0]
        for amount, who in ((150, alice), (300, bob), (400, alice))
    )
    soon = timezone.now() + timedelta(minutes=5)
    ToolCall.objects.filter(pk=second.pk).update(expires_at=soon)
    ToolCall.objects.filter(pk=third.pk).update(expires_at=soon + timedelta(minutes=1))
    ids = lambda **params: [r["tool_call_id"] for r in get(fran, PENDING, **params)[1]["results"]]  # noqa: E731
    assert ids(sort="deadline") == [second.pk, third.pk, first.pk]  # no deadline: last
    assert ids(sort="newest") == [third.pk, second.pk, first.pk]
    # Deadline order pages like any other, through the calls without one.
    page = get(fran, PENDING, sort="deadline", limit=2)[1]
    rest = get(fran, PENDING, sort="deadline", limit=2, cursor=page["next_cursor"])[1]
    assert [r["tool_call_id"] for r in rest["results"]] == [first.pk]
    assert ids(q="300.00") == [second.pk]  # the summary
    assert ids(q="A-1001") == [first.pk, second.pk, third.pk]  # the arguments
    assert ids(requester=f"user:{bob.pk}") == [second.pk]
    # A cursor of one order is no cursor of another.
    assert get(fran, PENDING, sort="newest", cursor=page["next_cursor"])[0] == 400
    assert get(fran, PENDING, sort="sideways")[0] == 400


PENDING = "/agent/approvals/pending"


@pytest.mark.parametrize(
    "params", [{"cursor": "garbage!"}, {"limit": 0}, {"limit": "many"}, {"limit": 201}]
)
def test_bad_paging_parameters_are_400(people, params):
    status, data = get(people["alice"], "/agent/approvals/pending", **params)
    assert (status, data["code"]) == (400, "invalid")


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


class SupervisorsDecideAll(DefaultPolicy):
    """A custom policy: supervisors may decide any pending approval, and the inbox knows it."""

    def can_decide(self, actor, call):
        return super().can_decide(actor, call) or actor.has_role("supervisor")

    def decidable(self, actor):
        q = super().decidable(actor)
        if actor.has_role("supervisor"):
            q |= Q(status="pending_approval")
        return q


def test_the_inbox_honours_a_custom_policys_decidable(turn, people, post, settings):
    settings.AGENT = {
        **settings.AGENT,
        "APPROVAL_POLICY": "tests.approvals.test_api.SupervisorsDecideAll",
    }
    sam = make_user("sam", "supervisor")
    mine = calls_of(turn(refund(10), actor=actor(sam)))[0]
    alices = calls_of(turn(refund(11), actor=actor(people["alice"])))[0]
    bobs = calls_of(turn(refund(12), actor=actor(people["bob"])))[0]
    listed = get(sam, "/agent/approvals/pending")[1]["results"]
    # Sam's own call matches two cases of the policy; the inbox lists it once.
    assert [r["tool_call_id"] for r in listed] == [mine.pk, alices.pk, bobs.pk]
    assert post(sam, "/agent/tool-call/approve", {"tool_call_id": bobs.pk})[0] == 200
    assert [r["tool_call_id"] for r in get(sam, "/agent/approvals/pending")[1]["results"]] == [
        mine.pk,
        alices.pk,
    ]


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
