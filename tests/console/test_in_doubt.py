"""Calls a crash left in doubt: listed with what is known, marked done or not done, audited."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agent_core.choices import CallStatus, RunStatus
from agent_core.engine import calls, leases, runs
from agent_core.models import ToolCall
from approvals import services as port
from approvals.models import DecisionAttempt
from demo.models import CachePurge
from tests.console.conftest import actor


@pytest.fixture
def doubtful(turn, people):
    """A purge the worker claimed and died in: the loop's own services put it in doubt."""
    run = turn('/call purge_cache {"path": "/sale"}', actor=actor(people["fran"]))
    call = ToolCall.objects.get(run=run)
    port.approve(call.pk, actor=actor(people["fran"]))  # not driven: the worker is "dead"
    lease = leases.acquire(run.pk, "worker-that-dies")
    assert lease is not None
    calls.claim_call(lease, call.pk)
    calls.mark_in_doubt(lease, call.pk)
    runs.block_on_doubt(lease, call.pk)
    call.refresh_from_db()
    assert call.status == CallStatus.IN_DOUBT
    return call


def test_the_page_shows_what_is_known(login, doubtful):
    response = login("fran").get(reverse("console:in_doubt"))
    html = response.content.decode()
    assert "purge_cache" in html and doubtful.idempotency_key in html
    assert "side_effect_retry_blocked" in html and "fran" in html
    assert 'data-count="in_doubt">1<' in html
    assert reverse("console:mark_done", args=[doubtful.pk]) in html


def test_someone_who_may_not_see_the_call_does_not_find_it_listed(login, doubtful):
    # The console shows what the API shows (issue 12): felix sees neither the run nor the call.
    html = login("felix").get(reverse("console:in_doubt")).content.decode()
    assert "purge_cache" not in html
    assert reverse("console:mark_done", args=[doubtful.pk]) not in html


def test_mark_done_records_the_result_and_the_run_goes_on(login, doubtful, decide, people):
    url = reverse("console:mark_done", args=[doubtful.pk])
    response = decide(login("fran").post, url, {f"{doubtful.pk}-result": '{"purged": "/sale"}'})
    assert response.status_code == 302
    doubtful.refresh_from_db()
    assert doubtful.status == CallStatus.SUCCEEDED and doubtful.result == {"purged": "/sale"}
    assert doubtful.run.status == RunStatus.COMPLETED
    assert not CachePurge.objects.exists()  # nothing ran again
    attempt = DecisionAttempt.objects.get(action="mark_done")
    fran = people["fran"]
    assert (attempt.outcome, attempt.via, attempt.actor_ref) == (
        "applied",
        "console",
        f"user:{fran.pk}",
    )


def test_a_result_that_is_not_json_is_refused_inline(login, doubtful):
    url = reverse("console:mark_done", args=[doubtful.pk])
    response = login("fran").post(url, {f"{doubtful.pk}-result": "{oops"})
    assert response.status_code == 400
    assert b"This is not valid JSON" in response.content
    doubtful.refresh_from_db()
    assert doubtful.status == CallStatus.IN_DOUBT
    assert not DecisionAttempt.objects.filter(action="mark_done").exists()


def test_mark_not_done_runs_the_call_again(login, doubtful, decide):
    response = decide(login("fran").post, reverse("console:mark_not_done", args=[doubtful.pk]))
    assert response.status_code == 302
    doubtful.refresh_from_db()
    assert doubtful.status == CallStatus.SUCCEEDED and doubtful.attempts == 2
    assert CachePurge.objects.count() == 1
    assert DecisionAttempt.objects.get(action="mark_not_done").outcome == "applied"


def test_an_operator_resolves_a_call_that_waits_on_someone_else(login, doubtful, decide, people):
    html = login("otto").get(reverse("console:in_doubt")).content.decode()
    assert reverse("console:mark_not_done", args=[doubtful.pk]) in html
    response = decide(login("otto").post, reverse("console:mark_not_done", args=[doubtful.pk]))
    assert response.status_code == 302
    assert CachePurge.objects.count() == 1
    attempt = DecisionAttempt.objects.get(action="mark_not_done")
    assert (attempt.actor_ref, attempt.outcome) == (f"user:{people['otto'].pk}", "applied")


def test_someone_who_may_not_see_the_call_is_answered_404(login, doubtful):
    response = login("felix").post(reverse("console:mark_not_done", args=[doubtful.pk]))
    assert response.status_code == 404
    doubtful.refresh_from_db()
    assert doubtful.status == CallStatus.IN_DOUBT


def test_resolving_twice_is_a_conflict_shown_on_the_card_and_audited(login, doubtful, decide):
    client = login("fran")
    decide(client.post, reverse("console:mark_not_done", args=[doubtful.pk]))
    response = client.post(reverse("console:mark_done", args=[doubtful.pk]))
    assert response.status_code == 409
    html = response.content.decode()
    assert "fran marked this not done" in html and "it is now succeeded" in html
    assert f'id="doubt-{doubtful.pk}"' in html  # the card stays, with the refusal on it
    assert reverse("console:mark_done", args=[doubtful.pk]) not in html
    refused = DecisionAttempt.objects.get(action="mark_done")
    assert refused.outcome in ("already_decided", "run_not_active")


def test_an_unknown_call_is_not_found_and_changes_nothing(login, db):
    response = login("fran").post(reverse("console:mark_not_done", args=["tc_nope"]))
    assert response.status_code == 404
    # A refused attempt, audited as the port audits one (issue #35); nothing else changed.
    attempt = DecisionAttempt.objects.get(action="mark_not_done")
    assert (attempt.tool_call_id, attempt.outcome, attempt.run_id) == ("tc_nope", "not_found", "")


def test_nothing_in_doubt_says_so(login, db):
    assert b"Nothing is in doubt" in login("otto").get(reverse("console:in_doubt")).content
