"""Remembered approvals: listed for their thread's owner and their granter; revoked through the
approval port."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from approvals import services as port
from approvals.models import DecisionAttempt, RememberedApproval
from tests.console.conftest import actor


@pytest.fixture
def grant(refund, people, decide):
    """fran approved alice's refund and remembered it for alice's thread."""
    decide(port.approve, refund.pk, actor=actor(people["fran"]), remember=True, via="console")
    return RememberedApproval.objects.get()


def _revoke(client, grant_id, **data):
    return client.post(reverse("console:revoke", args=[grant_id]), data)


def test_the_granter_sees_the_grant_with_revoke(login, grant, refund):
    response = login("fran").get(reverse("console:remembered"))
    assert list(response.context["grants"]) == [grant]
    html = response.content.decode()
    assert "issue_refund" in html and refund.pk in html and "active" in html
    assert reverse("console:revoke", args=[grant.pk]) in html
    assert 'href="/console/remembered/"' in html  # in the navigation


def test_someone_neither_owner_nor_granter_sees_none(login, grant):
    response = login("felix").get(reverse("console:remembered"))
    assert response.context["grants"] == []
    assert b"No active remembered approvals" in response.content


def test_revoke_stops_the_grant_and_is_audited(login, grant, people):
    client = login("fran")
    response = _revoke(client, grant.pk)
    assert response.status_code == 302 and response["Location"] == reverse("console:remembered")
    grant.refresh_from_db()
    assert grant.revoked_at is not None and grant.revoked_by_ref == actor(people["fran"]).ref
    attempt = DecisionAttempt.objects.get(action="revoke")
    assert (attempt.outcome, attempt.via) == ("applied", "console")
    page = client.get(response["Location"])
    assert "Revoked: issue_refund asks again" in page.content.decode()
    assert page.context["grants"] == []  # active only, by default
    everything = client.get(reverse("console:remembered"), {"all": "1"}).content.decode()
    assert "revoked" in everything and "by fran" in everything
    assert reverse("console:revoke", args=[grant.pk]) not in everything


def test_revoking_twice_says_it_already_was(login, grant):
    client = login("fran")
    _revoke(client, grant.pk)
    response = _revoke(client, grant.pk, all="1")
    assert response["Location"] == reverse("console:remembered") + "?all=1"
    assert b"was already revoked" in client.get(response["Location"]).content
    assert DecisionAttempt.objects.get(action="revoke", outcome="unchanged")


def test_someone_neither_owner_nor_granter_cannot_revoke(login, grant):
    response = _revoke(login("felix"), grant.pk)
    assert response.status_code == 403
    refusal = b"Nothing was revoked: only the thread&#x27;s owner, the granter or an operator"
    assert refusal in response.content
    grant.refresh_from_db()
    assert grant.revoked_at is None
    assert DecisionAttempt.objects.get(action="revoke").outcome == "not_approver"


def test_an_unknown_grant_is_not_found(login, db):
    response = _revoke(login("fran"), 999999)
    assert response.status_code == 404
    assert b"no remembered approval 999999" in response.content


def test_expired_grants_show_only_with_all(login, grant):
    RememberedApproval.objects.filter(pk=grant.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    client = login("fran")
    assert client.get(reverse("console:remembered")).context["grants"] == []
    html = client.get(reverse("console:remembered"), {"all": "1"}).content.decode()
    assert "expired" in html and reverse("console:revoke", args=[grant.pk]) not in html


def test_revoke_is_post_only(login, grant):
    assert login("fran").get(reverse("console:revoke", args=[grant.pk])).status_code == 405


def test_an_operator_sees_everyones_grants_with_their_expiry_and_may_revoke(login, grant, people):
    assert grant.expires_at is not None  # a grant lasts REMEMBER_TTL (8 hours) by default
    left = grant.expires_at - timezone.now()
    assert timedelta(hours=7, minutes=59) < left <= timedelta(hours=8)
    response = login("otto").get(reverse("console:remembered"))
    assert list(response.context["grants"]) == [grant]
    assert "never" not in response.content.decode()
    assert _revoke(login("otto"), grant.pk).status_code == 302
    grant.refresh_from_db()
    assert grant.revoked_by_ref == actor(people["otto"]).ref
