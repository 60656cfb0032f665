"""Operators nudge (notify again) and escalate now a call waiting on others (issue 42, item 5):
audited as theirs, refused to approvers who are not operators."""

from __future__ import annotations

import pytest
from django.core import mail
from django.test import Client, override_settings
from django.urls import reverse

from agent_core.actors import actor_for_user
from approvals.models import DecisionAttempt, Escalation
from tests.conftest import REFUND
from tests.factories import make_user

pytestmark = pytest.mark.django_db

ESCALATE = {"to": "managers", "before": 10, "may_decide": True}  # due 50 s after the request
SETTINGS = {
    "RULES": {"issue_refund": {"approver": "finance", "ttl": 60, "escalate": ESCALATE}},
    "NOTIFICATION_BACKENDS": ["approvals.notify.backends.EmailBackend"],
    "BASE_URL": "https://airlock.example",
}


@pytest.fixture
def waiting(turn):
    """alice's refund waiting on finance (fran), fran told once; otto operates, mo manages."""
    people = {
        "alice": make_user("alice"),
        "fran": make_user("fran", "finance", staff=True, email="fran@example.com"),
        "otto": make_user("otto", "operator", email="otto@example.com"),
        "mo": make_user("mo", "managers", email="mo@example.com"),
    }
    with override_settings(APPROVALS=SETTINGS):
        run = turn(REFUND, actor=actor_for_user(people["alice"]))
    assert [m.to for m in mail.outbox] == [["fran@example.com"]]
    return people, run.tool_calls.get()


def post(people, who, url, capture):
    client = Client()
    client.force_login(people[who])
    with override_settings(APPROVALS=SETTINGS), capture(execute=True):
        return client.post(url)


def test_an_operator_nudges_the_deciders_and_it_is_audited(
    waiting, django_capture_on_commit_callbacks
):
    people, call = waiting
    url = reverse("console:nudge", args=[call.pk])
    response = post(people, "otto", url, django_capture_on_commit_callbacks)
    assert response.status_code == 302
    nudged = mail.outbox[1]
    assert nudged.to == ["fran@example.com"] and "Reminder: approval needed" in nudged.subject
    [audit] = DecisionAttempt.objects.filter(action="nudge")
    assert (
        audit.outcome == "applied"
        and audit.actor_ref == actor_for_user(people["otto"]).ref
        and audit.via == "console"
    )

    post(people, "fran", url, django_capture_on_commit_callbacks)  # an approver, no operator
    assert len(mail.outbox) == 2
    refused = DecisionAttempt.objects.filter(action="nudge").exclude(pk=audit.pk).get()
    assert (
        refused.outcome == "forbidden" and refused.actor_ref == actor_for_user(people["fran"]).ref
    )


def test_an_operator_escalates_now_to_the_role_the_policy_names(
    waiting, django_capture_on_commit_callbacks
):
    people, call = waiting
    url = reverse("console:escalate", args=[call.pk])
    post(people, "fran", url, django_capture_on_commit_callbacks)
    assert Escalation.objects.get().escalated_at is None
    post(people, "otto", url, django_capture_on_commit_callbacks)
    assert Escalation.objects.get().escalated_at is not None
    assert mail.outbox[-1].to == ["mo@example.com"]
    [audit] = DecisionAttempt.objects.filter(action="escalate")
    assert audit.actor_ref == actor_for_user(people["otto"]).ref
    assert audit.detail == "escalated to managers (may decide)"
    client = Client()
    client.force_login(people["otto"])
    page = client.get(reverse("console:call", args=[call.pk])).content.decode()
    assert "escalated to managers" in page and "Escalate now" not in page and "Nudge" in page
