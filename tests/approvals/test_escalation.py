"""Escalation: a call still waiting shortly before its deadline is announced to a second role."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.test import override_settings
from django.urls import reverse

from agent_core.actors import actor_for_user
from agent_core.choices import CallStatus
from agent_core.engine import clock
from agent_core.exceptions import NotFound
from agent_core.extensions import sweep_jobs
from agent_core.models import StreamFrame, ToolCall
from approvals import services as port
from approvals.models import DecisionAttempt, Escalation
from approvals.rules import parse_rules
from approvals.selectors import pending_for
from tests.conftest import REFUND
from tests.factories import make_user

pytestmark = pytest.mark.django_db


def rules(may_decide: bool) -> dict:
    # Due one second after the request, well before it expires.
    escalate = {"to": "managers", "before": 59, "may_decide": may_decide}
    return {
        "RULES": {"issue_refund": {"approver": "finance", "ttl": 60, "escalate": escalate}},
        "NOTIFICATION_BACKENDS": ["approvals.notify.backends.EmailBackend"],
        "BASE_URL": "https://airlock.example",
    }


@pytest.fixture
def manager(db: None) -> User:
    return make_user("mo", "managers", staff=True, email="mo@example.com")


@pytest.fixture(autouse=True)
def host_clock_ahead(db: None) -> Iterator[None]:
    """This host's clock 200 ms ahead of the database's, as after a step of the host's clock
    (seen in CI): deadlines are the database's (``clock``), ``requested_at`` is the host's."""
    ahead = timedelta(milliseconds=200)
    clock.remember(connection, clock.now() - ahead, asked=time.monotonic())
    yield
    clock.remember(connection, clock.now() + ahead, asked=time.monotonic())  # the next tests'


def sweep(django_capture_on_commit_callbacks) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        for job in sweep_jobs():  # what approvals asks the sweeper to run: escalate, expire
            job()


def test_a_call_still_waiting_is_escalated_once_and_the_role_may_decide(
    turn, manager, decide, client, django_capture_on_commit_callbacks
):
    mo = actor_for_user(manager)
    with override_settings(APPROVALS=rules(may_decide=True)):
        call = ToolCall.objects.get(run=turn(REFUND))
        escalation = Escalation.objects.get(tool_call=call)
        assert call.expires_at is not None
        assert (call.expires_at - escalation.due_at).total_seconds() == 59
        sweep(django_capture_on_commit_callbacks)  # not due yet
        assert Escalation.objects.get().escalated_at is None and not mail.outbox
        assert list(pending_for(mo)) == []

        time.sleep(max(0.0, (escalation.due_at - clock.now()).total_seconds()) + 0.1)
        sweep(django_capture_on_commit_callbacks)
        sweep(django_capture_on_commit_callbacks)  # once only
    [frame] = StreamFrame.objects.filter(run=call.run, kind="approval-escalated")
    assert (frame.data["role"], frame.data["may_decide"]) == ("managers", True)
    [audit] = DecisionAttempt.objects.filter(action="escalate")
    assert (audit.actor_ref, audit.via, audit.detail) == (
        "system",
        "escalation",
        "escalated to managers (may decide)",
    )
    [message] = mail.outbox
    assert message.to == ["mo@example.com"] and "Escalated: approval needed" in message.subject
    assert list(pending_for(mo)) == [call]
    client.force_login(manager)
    assert "escalated to managers" in client.get(reverse("console:inbox")).content.decode()

    decide(port.approve, call.pk, actor=mo)
    call.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED and call.decided_by_ref == mo.ref


def test_without_may_decide_the_role_is_told_but_may_not_decide(
    turn, manager, decide, django_capture_on_commit_callbacks
):
    with override_settings(APPROVALS=rules(may_decide=False)):
        call = ToolCall.objects.get(run=turn(REFUND))
        Escalation.objects.update(due_at=clock.now())  # due at once
        sweep(django_capture_on_commit_callbacks)
    assert len(mail.outbox) == 1
    # Told, not an approver: the call is not the manager's to see (404, not 403; issue 12).
    with pytest.raises(NotFound):
        decide(port.approve, call.pk, actor=actor_for_user(manager))
    assert list(pending_for(actor_for_user(manager))) == []


def test_a_call_decided_in_time_is_never_escalated(
    turn, manager, decide, django_capture_on_commit_callbacks
):
    fran = make_user("fran", "finance")
    with override_settings(APPROVALS=rules(may_decide=True)):
        call = ToolCall.objects.get(run=turn(REFUND))
        decide(port.approve, call.pk, actor=actor_for_user(fran))
        Escalation.objects.update(due_at=clock.now())
        sweep(django_capture_on_commit_callbacks)
    assert Escalation.objects.get().escalated_at is None
    assert not StreamFrame.objects.filter(kind="approval-escalated").exists()


@pytest.mark.parametrize(
    "escalate",
    [
        {"to": "managers", "before": 3600},  # not shorter than the ttl
        {"to": "managers"},  # no before
        {"to": "requester", "before": 10},
        {"to": "managers", "before": 10, "may_decide": "yes"},
        {"to": "managers", "before": 10, "after": 1},
        "managers",
    ],
)
def test_a_bad_escalation_rule_is_reported(escalate):
    with pytest.raises(ImproperlyConfigured):
        parse_rules({"issue_refund": {"approver": "finance", "ttl": 3600, "escalate": escalate}})


def test_an_escalation_needs_a_ttl():
    with pytest.raises(ImproperlyConfigured):
        parse_rules({"issue_refund": {"escalate": {"to": "managers", "before": 10}}})


def test_whoever_may_decide_an_escalated_call_may_see_its_run(
    turn, manager, client, django_capture_on_commit_callbacks
):
    with override_settings(APPROVALS=rules(may_decide=True)):
        call = ToolCall.objects.get(run=turn(REFUND))
        Escalation.objects.update(due_at=clock.now())  # due at once
        sweep(django_capture_on_commit_callbacks)
    client.force_login(manager)
    # The run and thread they decide about: the console's run page (transcript) and the API.
    assert client.get(reverse("console:run", args=[call.run_id])).status_code == 200
    assert client.get(f"/agent/runs/{call.run_id}").status_code == 200
    assert client.get(f"/agent/threads/{call.thread_id}").status_code == 200
    assert call.run_id in {r["id"] for r in client.get("/agent/runs").json()["results"]}
    # Seeing is not managing: the thread stays its owner's.
    assert client.post(f"/agent/chat/{call.run_id}/cancel").status_code == 403


def test_a_role_only_told_of_an_escalation_does_not_see_the_run(
    turn, manager, client, django_capture_on_commit_callbacks
):
    with override_settings(APPROVALS=rules(may_decide=False)):
        call = ToolCall.objects.get(run=turn(REFUND))
        Escalation.objects.update(due_at=clock.now())
        sweep(django_capture_on_commit_callbacks)
    client.force_login(manager)
    assert client.get(reverse("console:run", args=[call.run_id])).status_code == 404
    assert client.get(f"/agent/runs/{call.run_id}").status_code == 404
