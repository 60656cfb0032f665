"""Cancel from the run page and the runs list: the API's rule (owner or operator), POST only."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agent_core.choices import CallStatus, RunStatus
from agent_core.engine import leases
from agent_core.models import ToolCall
from approvals import services as port
from tests.console.conftest import REFUND, actor


@pytest.fixture
def waiting(turn, people, finance_policy):
    """alice's run, parked on a refund that waits on finance."""
    run = turn(REFUND, actor=actor(people["alice"]))
    assert run.status == RunStatus.WAITING
    return run


def _cancel(client, run, **data):
    return client.post(reverse("console:cancel_run", args=[run.pk]), data)


def test_an_operator_cancels_a_parked_run_at_once(login, waiting, people):
    client = login("otto")
    assert reverse("console:cancel_run", args=[waiting.pk]).encode() in (
        client.get(reverse("console:run", args=[waiting.pk])).content
    )
    response = _cancel(client, waiting)
    assert response.status_code == 302
    assert response["Location"] == reverse("console:run", args=[waiting.pk])
    waiting.refresh_from_db()
    assert waiting.status == RunStatus.CANCELLED
    assert ToolCall.objects.get(run=waiting).status == CallStatus.CANCELLED
    page = client.get(response["Location"]).content.decode()
    assert f"Cancelled {waiting.pk}." in page
    assert reverse("console:cancel_run", args=[waiting.pk]) not in page  # nothing left to cancel


def test_the_owner_may_cancel_their_own_run(turn, login, people, finance_policy):
    run = turn(REFUND, actor=actor(people["fran"]))
    assert _cancel(login("fran"), run).status_code == 302
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED


def test_a_driven_run_is_marked_cancelling(turn, login, people, finance_policy):
    run = turn(REFUND, actor=actor(people["alice"]))
    call = ToolCall.objects.get(run=run)
    port.approve(call.pk, actor=actor(people["fran"]))  # not driven: a worker takes it below
    assert leases.acquire(run.pk, "a-live-worker") is not None
    client = login("otto")
    response = _cancel(client, run)
    assert response.status_code == 302
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLING and run.cancel_requested
    page = client.get(response["Location"]).content.decode()
    assert "it stops at its next safe point" in page
    again = _cancel(client, run)  # accepted, as over REST: nothing changes
    assert again.status_code == 302
    assert "already being cancelled" in client.get(again["Location"]).content.decode()
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLING


def test_someone_neither_owner_nor_operator_is_refused(login, waiting):
    client = login("fran")  # staff and finance: may open the console, may not cancel
    page = client.get(reverse("console:run", args=[waiting.pk])).content
    assert reverse("console:cancel_run", args=[waiting.pk]).encode() not in page
    response = _cancel(client, waiting)
    assert response.status_code == 403
    assert b"Only the thread&#x27;s owner or an operator may cancel this run." in response.content
    waiting.refresh_from_db()
    assert waiting.status == RunStatus.WAITING


def test_a_finished_run_is_left_as_it_is(login, waiting):
    client = login("otto")
    _cancel(client, waiting)
    response = _cancel(client, waiting)  # accepted, as over REST (202, the status unchanged)
    assert response.status_code == 302
    page = client.get(response["Location"]).content.decode()
    assert "This run already cancelled: there is nothing to cancel." in page


def test_cancel_from_the_runs_list_comes_back_to_it(login, waiting):
    client = login("otto")
    listing = client.get(reverse("console:runs"), {"status": "waiting"})
    assert reverse("console:cancel_run", args=[waiting.pk]).encode() in listing.content
    back = reverse("console:runs") + "?status=waiting"
    response = _cancel(client, waiting, next=back)
    assert response["Location"] == back
    waiting.refresh_from_db()
    assert waiting.status == RunStatus.CANCELLED


def test_cancel_never_redirects_off_site(login, waiting):
    response = _cancel(login("otto"), waiting, next="https://evil.example/")
    assert response["Location"] == reverse("console:run", args=[waiting.pk])


def test_cancel_is_post_only_and_checks_csrf(login, waiting, client):
    assert login("otto").get(reverse("console:cancel_run", args=[waiting.pk])).status_code == 405
    client.handler.enforce_csrf_checks = True
    assert _cancel(client, waiting).status_code == 403
    waiting.refresh_from_db()
    assert waiting.status == RunStatus.WAITING


def test_an_unknown_run_is_not_found(login, db):
    assert login("otto").post(reverse("console:cancel_run", args=["run_nope"])).status_code == 404
