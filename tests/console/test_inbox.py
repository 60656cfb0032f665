"""The inbox: what it shows to whom, and every decision through it (via the approval port)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from agent_core.choices import CallStatus, RunStatus
from agent_core.models import ToolCall
from approvals import sql
from approvals.models import DecisionAttempt, RememberedApproval
from demo.models import Refund
from tests.console.conftest import REFUND, actor, card_html, listed

FRAGMENT = {"HTTP_X_CONSOLE_FRAGMENT": "1"}


def _post(client, action, call, data=None, **extra):
    return client.post(reverse(f"console:{action}", args=[call.pk]), data or {}, **extra)


def test_the_approver_sees_a_row_that_opens_into_the_full_card(login, refund):
    client = login("fran")
    response = client.get(reverse("console:inbox"))
    assert response.status_code == 200
    assert listed(response) == [refund.pk]
    row = response.content.decode()
    assert "Refund 25.00 on order A-1001" in row and "alice" in row and "finance" in row
    assert reverse("console:call", args=[refund.pk]) in row  # opens into its card
    assert f'name="ids" value="{refund.pk}" form="bulk"' in row  # may be bulk-decided
    assert "<nav" in row and 'data-count="waiting_on_you">1<' in row
    html = card_html(client, refund)
    assert "finance decides" in html and "issue_refund" in html
    assert "&quot;order_id&quot;: &quot;A-1001&quot;" in html  # pretty args, in full
    assert "alice" in html and refund.run_id in html  # requester, run link
    assert f'data-countdown="{refund.expires_at.isoformat()}"' in html
    assert "Approve &amp; remember for this thread" in html
    # Without JavaScript the row's link is a page of its own.
    assert (
        "Back to the inbox"
        in client.get(reverse("console:call", args=[refund.pk])).content.decode()
    )


def test_someone_without_the_role_sees_the_card_read_only(login, refund):
    client = login("otto")
    assert listed(client.get(reverse("console:inbox"))) == []
    response = client.get(reverse("console:inbox"), {"show": "others"})
    assert listed(response) == [refund.pk]
    assert 'name="ids"' not in response.content.decode()  # nothing to select
    html = card_html(client, refund)
    assert "only finance decides this" in html
    assert reverse("console:approve", args=[refund.pk]) not in html


def test_someone_without_the_role_cannot_decide_by_posting(login, refund):
    response = _post(login("otto"), "approve", refund)
    assert response.status_code == 403
    assert b"You may not decide this call: it waits on finance." in response.content
    refund.refresh_from_db()
    assert refund.status == CallStatus.PENDING_APPROVAL
    attempt = DecisionAttempt.objects.get()
    assert (attempt.outcome, attempt.via) == ("not_approver", "console")


def test_approve_runs_the_call_and_the_run_completes(login, refund, decide):
    client = login("fran")
    response = decide(_post, client, "approve", refund)
    assert response.status_code == 302 and response["Location"] == reverse("console:inbox")
    refund.refresh_from_db()
    assert refund.status == CallStatus.SUCCEEDED and refund.decided_via == "console"
    assert refund.run.status == RunStatus.COMPLETED
    assert Refund.objects.count() == 1
    assert listed(client.get(reverse("console:inbox"))) == []
    attempt = DecisionAttempt.objects.get()
    assert (attempt.action, attempt.outcome, attempt.via) == ("approve", "applied", "console")


def test_a_fragment_request_gets_a_notice(login, refund, decide):
    response = decide(_post, login("fran"), "approve", refund, **FRAGMENT)
    assert response.status_code == 200
    assert f"Approved: issue_refund — {refund.summary}." in response.content.decode()


def test_approve_and_remember_remembers_for_the_thread(login, refund, decide):
    decide(_post, login("fran"), "approve", refund, {"remember": "on"})
    remembered = RememberedApproval.objects.get()
    assert (remembered.thread_id, remembered.tool_name) == (refund.thread_id, "issue_refund")
    refund.refresh_from_db()
    assert refund.remember


def test_reject_needs_a_reason(login, refund):
    response = _post(login("fran"), "reject", refund, {"reason": ""})
    assert response.status_code == 400
    assert b"This field is required." in response.content
    refund.refresh_from_db()
    assert refund.status == CallStatus.PENDING_APPROVAL
    assert not DecisionAttempt.objects.exists()


def test_reject_with_a_reason_tells_the_model(login, refund, decide):
    decide(_post, login("fran"), "reject", refund, {"reason": "over the limit"})
    refund.refresh_from_db()
    assert refund.status == CallStatus.REJECTED and refund.reason == "over the limit"
    assert not Refund.objects.exists()
    assert refund.run.status == RunStatus.COMPLETED


def test_edit_args_that_are_not_json_are_shown_inline(login, refund):
    response = _post(login("fran"), "edit", refund, {"args": "{nope"}, **FRAGMENT)
    assert response.status_code == 400
    html = response.content.decode()
    assert "This is not valid JSON" in html and "data-keep" in html
    refund.refresh_from_db()
    assert refund.status == CallStatus.PENDING_APPROVAL


def test_edit_args_that_fail_the_schema_are_shown_inline(login, refund):
    args = json.dumps({"order_id": "A-1001", "amount": -5})
    response = _post(login("fran"), "edit", refund, {"args": args})
    assert response.status_code == 400
    html = response.content.decode()
    assert "the edited arguments do not fit the schema" in html
    assert "amount: Input should be greater than 0" in html
    assert not DecisionAttempt.objects.exists()  # a preview is not an attempt to decide
    response = _post(login("fran"), "edit", refund, {"args": args, "confirm": "1"})
    assert response.status_code == 400  # a confirmation of args never previewed: refused too
    refund.refresh_from_db()
    assert refund.status == CallStatus.PENDING_APPROVAL and refund.original_args is None
    assert DecisionAttempt.objects.get().outcome == "invalid"


def test_an_edit_is_shown_field_by_field_with_the_policys_answer_before_it_decides(
    login, refund, decide
):
    """Issue 42: the first step shows the changes and who the policy gives the edited call to,
    and decides nothing; the confirmation approves exactly the previewed args."""
    client = login("fran")
    args = json.dumps({"order_id": "A-1001", "amount": "10.00"})
    response = _post(client, "edit", refund, {"args": args}, **FRAGMENT)
    assert response.status_code == 200 and response["X-Console-Card"] == "1"
    html = response.content.decode()
    assert '<tr data-change="amount">' in html and "<del>&quot;25&quot;</del>" in html
    assert "<ins>&quot;10.00&quot;</ins>" in html and 'data-change="order_id"' not in html
    assert "The policy gives the edited call to finance" in html
    refund.refresh_from_db()
    assert refund.status == CallStatus.PENDING_APPROVAL and not DecisionAttempt.objects.exists()
    confirmed = {"args": json.dumps(refund_args := json.loads(args)), "confirm": "1"}
    decide(_post, client, "edit", refund, confirmed)
    refund.refresh_from_db()
    assert refund.status == CallStatus.SUCCEEDED and refund_args["amount"] == "10.00"
    assert refund.original_args == {"order_id": "A-1001", "amount": "25", "reason": ""}
    assert str(Refund.objects.get().amount) == "10.00"
    assert DecisionAttempt.objects.get().detail == 'edited amount: "25" → "10.00"'


def test_an_edit_outside_the_tools_bounds_is_refused_at_the_preview(login, refund):
    """The demo refund: only amount and reason may change, never past the order's total."""
    client = login("fran")
    for args, said in (
        ({"order_id": "A-1003", "amount": "25"}, "order_id may not be edited"),
        ({"order_id": "A-1001", "amount": "5000"}, "exceeds the order&#x27;s total of 59.90"),
    ):
        response = _post(client, "edit", refund, {"args": json.dumps(args)}, **FRAGMENT)
        assert response.status_code == 400 and said in response.content.decode()
    refund.refresh_from_db()
    assert refund.status == CallStatus.PENDING_APPROVAL and not Refund.objects.exists()


def test_a_stale_card_explains_who_decided_first(login, refund, decide):
    decide(_post, login("fran"), "approve", refund)
    response = _post(login("felix"), "approve", refund, **FRAGMENT)
    assert response.status_code == 200  # the same decision again: unchanged, not a conflict
    response = _post(login("felix"), "reject", refund, {"reason": "no"}, **FRAGMENT)
    assert response.status_code == 409
    html = response.content.decode()
    assert "fran approved this" in html and "ago" in html and "data-keep" in html
    outcomes = list(DecisionAttempt.objects.order_by("id").values_list("outcome", flat=True))
    assert outcomes == ["applied", "unchanged", "already_decided"]


def test_a_stale_card_after_a_rejection_says_so_as_a_page(login, refund, decide):
    decide(_post, login("fran"), "reject", refund, {"reason": "too much"})
    response = _post(login("felix"), "approve", refund)
    assert response.status_code == 409
    assert "fran rejected this" in response.content.decode()
    assert "Decision not made" in response.content.decode()


def test_a_late_decision_on_an_expired_request_answers_gone(login, refund, decide):
    ToolCall.objects.filter(pk=refund.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = decide(_post, login("fran"), "approve", refund)
    assert response.status_code == 410
    assert "This request expired" in response.content.decode()


def test_an_unknown_call_is_not_found(login, db):
    response = login("fran").post(reverse("console:approve", args=["tc_nope"]))
    assert response.status_code == 404


def test_filters_narrow_the_inbox(login, refund, turn, people):
    purge = turn('/call purge_cache {"path": "/x"}', actor=actor(people["fran"]))
    client = login("fran")
    ids = listed
    assert len(ids(client.get(reverse("console:inbox")))) == 2
    assert ids(client.get(reverse("console:inbox"), {"tool": "issue_refund"})) == [refund.pk]
    assert ids(client.get(reverse("console:inbox"), {"approver": "finance"})) == [refund.pk]
    by_fran = client.get(reverse("console:inbox"), {"requester": "fran"})
    assert ids(by_fran) == [ToolCall.objects.get(run=purge).pk]
    assert ids(client.get(reverse("console:inbox"), {"agent": "other"})) == []
    newest = ids(client.get(reverse("console:inbox"), {"sort": "newest"}))
    assert newest[0] == ToolCall.objects.get(run=purge).pk and newest[1] == refund.pk
    deadline = ids(client.get(reverse("console:inbox"), {"sort": "deadline"}))
    assert deadline == [refund.pk, ToolCall.objects.get(run=purge).pk]  # no deadline: last
    assert ids(client.get(reverse("console:inbox"), {"q": "Purge /x"})) == [
        ToolCall.objects.get(run=purge).pk
    ]
    assert b"with these filters" in client.get(reverse("console:inbox"), {"tool": "x"}).content


def test_the_fragment_carries_the_rows_and_the_counts(login, refund):
    response = login("fran").get(reverse("console:inbox_fragment"), **FRAGMENT)
    assert response.status_code == 200
    assert response["X-Console-Counts"] == "waiting_on_you=1;in_doubt=0"
    assert f'data-row="{refund.pk}"' in response.content.decode()
    assert b"<nav" not in response.content
    again = login("fran").get(
        reverse("console:inbox_fragment"), HTTP_IF_NONE_MATCH=response["ETag"], **FRAGMENT
    )
    assert again.status_code == 304  # the page's re-check: unchanged, nothing sent


def test_the_fragment_counts_what_waits_on_the_viewer_once(login, refund):
    client = login("fran")
    with CaptureQueriesContext(connection) as queries:
        client.get(reverse("console:inbox_fragment"), **FRAGMENT)
    decidable = sql.DECIDABLE_COUNT.split("%")[0]
    assert sum(q["sql"].startswith(decidable) for q in queries.captured_queries) == 1


def test_an_empty_inbox_says_what_happens_next(login, db):
    response = login("fran").get(reverse("console:inbox"))
    assert b"Nothing waits on you" in response.content


@pytest.fixture
def question(turn, people):
    run = turn('/call ask_user {"question": "Which size?"}', actor=actor(people["otto"]))
    return ToolCall.objects.get(run=run, tool_name="ask_user")


def test_a_question_gets_a_form_from_its_answer_schema(login, question):
    client = login("otto")
    assert listed(client.get(reverse("console:inbox"))) == [question.pk]
    response = client.get(reverse("console:call", args=[question.pk]))
    card = response.context["card"]
    assert card.is_question and list(card.answer_form.fields) == ["answer"]
    html = response.content.decode()
    assert "Which size?" in html and "Your answer" in html
    assert reverse("console:answer", args=[question.pk]) in html


def test_an_empty_answer_is_refused_inline(login, question):
    response = login("otto").post(
        reverse("console:answer", args=[question.pk]), {f"a-{question.pk}-answer": ""}
    )
    assert response.status_code == 400
    assert b"This field is required." in response.content
    question.refresh_from_db()
    assert question.status == CallStatus.PENDING_INPUT


def test_an_answer_becomes_the_result(login, question, decide):
    client = login("otto")
    url = reverse("console:answer", args=[question.pk])
    response = decide(client.post, url, {f"a-{question.pk}-answer": "XL"})
    assert response.status_code == 302
    question.refresh_from_db()
    assert question.status == CallStatus.SUCCEEDED and question.result == {"answer": "XL"}
    again = client.post(url, {f"a-{question.pk}-answer": "M"})
    assert again.status_code == 409
    assert "otto answered this" in again.content.decode()


def test_only_the_asker_may_answer(login, question):
    assert listed(login("fran").get(reverse("console:inbox"))) == []
    response = login("fran").post(
        reverse("console:answer", args=[question.pk]), {f"a-{question.pk}-answer": "S"}
    )
    assert response.status_code == 404  # fran cannot see alice's question: it is unknown


def test_under_the_demo_policy_each_approver_sees_their_own(login, turn, people, demo_policy):
    """``make demo``'s policy: refunds wait on finance, campaigns on marketing, small refunds on
    nobody."""
    alice = actor(people["alice"])
    refund = ToolCall.objects.get(run=turn(REFUND, actor=alice))
    campaign = ToolCall.objects.get(
        run=turn('/call send_campaign {"campaign_id": "spring-sale"}', actor=alice)
    )
    small = turn('/call issue_refund {"order_id": "A-1001", "amount": 5}', actor=alice)
    assert small.status == RunStatus.COMPLETED
    assert (refund.approver, campaign.approver) == ("finance", "marketing")
    fran = login("fran")
    assert listed(fran.get(reverse("console:inbox"))) == [refund.pk]
    # alice's campaign is not fran's to see (SPEC §7): not even read-only.
    assert listed(fran.get(reverse("console:inbox"), {"show": "others"})) == []
    assert fran.get(reverse("console:call", args=[campaign.pk])).status_code == 404
    assert "only marketing decides this" in card_html(login("otto"), campaign)
    people["otto"].groups.add(Group.objects.get_or_create(name="marketing")[0])
    otto = login("otto").get(reverse("console:inbox"))
    assert listed(otto) == [campaign.pk]
