"""Issue #12: the console shows what the API shows (one visibility rule), and refuses ids and
JSON the database cannot hold with a 4xx, never a 500."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from agent_core.choices import CallStatus
from agent_core.models import ToolCall
from approvals import services as port
from approvals.guards import may_see
from approvals.models import DecisionAttempt
from tests.console.conftest import REFUND, actor, listed
from tests.factories import make_user

pytestmark = pytest.mark.django_db

PURGE = '/call purge_cache {"path": "/products"}'  # waits on the requester, alice


@pytest.fixture
def purge(turn, people, finance_policy):
    """alice's pending purge: fran (staff, finance) has no business with it, otto (operator)
    sees every run."""
    run = turn(PURGE, actor=actor(people["alice"]))
    call = ToolCall.objects.get(run=run)
    port.reject(call.pk, actor=actor(people["alice"]), reason="not now", via="api")
    return call


def test_staff_without_the_operator_role_see_only_what_the_api_shows_them(login, purge, refund):
    fran = login("fran")
    listed = {r.pk for r in fran.get(reverse("console:runs")).context["results"].rows}
    assert listed == {refund.run_id}  # her refund to decide, not alice's purge
    assert fran.get(reverse("console:run", args=[purge.run_id])).status_code == 404
    fragment = reverse("console:run_fragment", args=[purge.run_id])
    assert fran.get(fragment).status_code == 404
    assert fran.post(reverse("console:cancel_run", args=[purge.run_id])).status_code == 404
    audit = fran.get(reverse("console:audit")).context["results"].rows
    assert purge.pk not in {a.tool_call_id for a in audit}
    otto = login("otto")
    listed = {r.pk for r in otto.get(reverse("console:runs")).context["results"].rows}
    assert listed == {refund.run_id, purge.run_id}
    assert otto.get(reverse("console:run", args=[purge.run_id])).status_code == 200


def test_a_decision_on_a_call_the_user_cannot_see_is_404_and_audited_as_not_found(
    login, people, turn, finance_policy
):
    run = turn(PURGE, actor=actor(people["alice"]))
    call = ToolCall.objects.get(run=run)
    response = login("fran").post(reverse("console:approve", args=[call.pk]))
    assert response.status_code == 404
    call.refresh_from_db()
    assert call.status == CallStatus.PENDING_APPROVAL
    # As the port audits one (issue #35): a refused attempt, as if no such call existed.
    attempt = DecisionAttempt.objects.get()
    assert (attempt.tool_call_id, attempt.outcome, attempt.via) == (call.pk, "not_found", "console")


@pytest.mark.parametrize(
    "path",
    [
        "/console/runs/%00/",
        "/console/runs/%00/fragment/",
        "/console/runs/%00/cancel/",
        "/console/calls/%00/approve/",
        "/console/calls/%00/edit/",
        "/console/calls/%00/answer/",
        "/console/calls/%00/mark-done/",
    ],
)
def test_a_nul_in_an_id_is_404(login, path):
    client = login("otto")
    assert client.get(path).status_code == 404
    assert client.post(path).status_code == 404


@pytest.mark.parametrize(
    "args",
    [
        json.dumps({"order_id": "A-1001\u0000", "amount": 5}),
        '{"order_id": ' + "[" * 2000 + "]" * 2000 + "}",
        '{"order_id": "A-1001\\ud800", "amount": 5}',  # a lone surrogate (issue #35)
        '{"order_id\\udfff": "A-1001", "amount": 5}',
    ],
)
def test_edited_args_the_database_cannot_hold_are_400_and_change_nothing(login, refund, args):
    response = login("fran").post(reverse("console:edit", args=[refund.pk]), {"args": args})
    assert response.status_code == 400
    refund.refresh_from_db()
    assert refund.status == CallStatus.PENDING_APPROVAL and refund.original_args is None
    assert not DecisionAttempt.objects.exists()


@pytest.mark.parametrize("bad", ["tc_\x00", "tc_" + "x" * 5000, "tc_\u00e9"])
def test_a_bulk_id_no_call_can_have_is_400_not_a_database_error(login, refund, bad):
    """Issue #35: a NUL or a 5,000-character id reached the query: a psycopg DataError, 500."""
    for confirm in ("", "on"):
        form = {"ids": [refund.pk, bad], "action": "approve", "confirm": confirm}
        response = login("fran").post(reverse("console:bulk"), form)
        assert response.status_code == 400 and b"by their ids" in response.content
    refund.refresh_from_db()
    assert refund.status == CallStatus.PENDING_APPROVAL
    assert not DecisionAttempt.objects.exists()


def test_waiting_on_others_lists_only_the_calls_the_viewer_may_see(login, people, turn, refund):
    """SPEC §7: an unseen call is never shown. fran (staff, finance) may not see alice's pending
    purge (not her thread, not her role): it is neither on her *Waiting on others* tab, nor
    counted, nor a card, nor a row."""
    purge = ToolCall.objects.get(run=turn(PURGE, actor=actor(people["alice"])))
    fran = login("fran")
    response = fran.get(reverse("console:inbox"), {"show": "others"})
    assert listed(response) == []
    assert response.context["listing"].counts == {"yours": 1, "others": 0}
    assert fran.get(reverse("console:call", args=[purge.pk])).status_code == 404
    row = reverse("console:call_row", args=[purge.pk])
    assert fran.get(row, {"show": "others"}).status_code == 204
    # otto (operator) sees every run, so every call waiting on someone else.
    others = login("otto").get(reverse("console:inbox"), {"show": "others"})
    assert set(listed(others)) == {purge.pk, refund.pk}


def test_the_pending_api_lists_only_calls_the_viewer_may_see(login, people, turn, refund):
    """The API's pending list is the viewer's *Waiting on you* alone: every call on it is one
    the policy lets them decide, so one they may see (``approvals.guards.may_see``)."""
    purge = ToolCall.objects.get(run=turn(PURGE, actor=actor(people["alice"])))
    fran = actor(people["fran"])
    listed_ids = [
        c["tool_call_id"] for c in login("fran").get("/agent/approvals/pending").json()["results"]
    ]
    assert listed_ids == [refund.pk]
    assert not may_see(fran, purge)


def test_each_tab_counts_the_rows_it_lists_for_every_viewer(login, people, turn, refund):
    """The *Waiting on others* count is the calls the viewer may see less those waiting on it,
    and on a tab that fits on its page, its rows: either way the rows the tab lists. sam (staff,
    no role) sees his own refunds wait on finance."""
    people["sam"] = make_user("sam", staff=True)
    for who in ("fran", "sam"):
        turn(PURGE, actor=actor(people[who]))  # waits on its requester
        turn(REFUND, actor=actor(people[who]))  # waits on finance
    turn(REFUND, actor=actor(people["sam"]))
    expected = {"fran": (5, 0), "felix": (4, 0), "sam": (1, 2), "otto": (0, 6)}
    for name, (yours_count, others_count) in expected.items():
        client = login(name)
        inbox = reverse("console:inbox")
        yours, others = client.get(inbox), client.get(inbox, {"show": "others"})
        one_by_one = client.get(inbox, {"show": "others", "limit": 1})  # counted, not listed
        counts = yours.context["listing"].counts
        assert counts == others.context["listing"].counts == one_by_one.context["listing"].counts
        assert (counts["yours"], counts["others"]) == (len(listed(yours)), len(listed(others)))
        assert (counts["yours"], counts["others"]) == (yours_count, others_count), name
