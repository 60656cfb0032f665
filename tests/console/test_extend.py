"""Extending a pending request's deadline from its inbox card, through the approval port."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from agent_core.choices import CallStatus
from agent_core.models import ToolCall
from approvals.models import DecisionAttempt
from tests.console.conftest import actor, card_html

FRAGMENT = {"HTTP_X_CONSOLE_FRAGMENT": "1"}


@pytest.fixture(autouse=True)
def extensions_up_to_two_days(settings):
    settings.APPROVALS = {"MAX_EXTENSION": {"*": 2 * 86400}}


def _extend(client, call, by="1h", **extra):
    return client.post(reverse("console:extend", args=[call.pk]), {"by": by}, **extra)


def test_the_approver_sees_the_extend_form_on_a_card_with_a_deadline(login, refund):
    html = card_html(login("fran"), refund)
    assert reverse("console:extend", args=[refund.pk]) in html and "+1 day" in html


def test_extend_pushes_the_deadline_back_from_the_deadline(login, refund, people):
    before = refund.expires_at
    response = _extend(login("fran"), refund, "1h")
    assert response.status_code == 302 and response["Location"] == reverse("console:inbox")
    refund.refresh_from_db()
    assert refund.expires_at == before + timedelta(hours=1)
    assert refund.status == CallStatus.PENDING_APPROVAL
    attempt = DecisionAttempt.objects.get()
    assert (attempt.action, attempt.outcome, attempt.via, attempt.actor_ref) == (
        "extend",
        "applied",
        "console",
        actor(people["fran"]).ref,
    )
    assert refund.expires_at.isoformat() in attempt.detail


def test_a_fragment_request_gets_a_notice_with_the_new_deadline(login, refund):
    response = _extend(login("fran"), refund, "15m", **FRAGMENT)
    assert response.status_code == 200
    refund.refresh_from_db()
    local = timezone.localtime(refund.expires_at)
    assert f"Extended until {local:%Y-%m-%d %H:%M}" in response.content.decode()


def test_an_unknown_step_is_refused_inline_and_changes_nothing(login, refund):
    before = refund.expires_at
    response = _extend(login("fran"), refund, "1y", **FRAGMENT)
    assert response.status_code == 400
    html = response.content.decode()
    assert "Check the form: nothing was decided." in html and "Select a valid choice" in html
    refund.refresh_from_db()
    assert refund.expires_at == before and not DecisionAttempt.objects.exists()


def test_someone_without_the_role_cannot_extend(login, refund):
    html = card_html(login("otto"), refund)
    assert reverse("console:extend", args=[refund.pk]) not in html
    before = refund.expires_at
    response = _extend(login("otto"), refund)
    assert response.status_code == 403
    assert b"You may not decide this call: it waits on finance." in response.content
    refund.refresh_from_db()
    assert refund.expires_at == before
    assert DecisionAttempt.objects.get().outcome == "not_approver"


def test_a_request_past_its_deadline_expires_instead(login, refund):
    ToolCall.objects.filter(pk=refund.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = _extend(login("fran"), refund, "1d")
    assert response.status_code == 410
    assert "This request expired" in response.content.decode()
    refund.refresh_from_db()
    assert refund.status == CallStatus.EXPIRED


def test_a_decided_request_cannot_be_extended(login, refund, decide):
    client = login("fran")
    decide(client.post, reverse("console:approve", args=[refund.pk]))
    response = _extend(client, refund)
    assert response.status_code == 409
    assert "fran approved this" in response.content.decode()


def test_a_request_without_a_deadline_has_no_extend_form(login, turn, people):
    run = turn('/call purge_cache {"path": "/sale"}', actor=actor(people["fran"]))
    call = ToolCall.objects.get(run=run)
    assert call.expires_at is None
    client = login("fran")
    html = card_html(client, call)
    assert reverse("console:approve", args=[call.pk]) in html
    assert reverse("console:extend", args=[call.pk]) not in html
    response = _extend(client, call)
    assert response.status_code == 400
    assert "this request has no deadline to extend" in response.content.decode()
