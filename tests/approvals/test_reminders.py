"""Reminders (SPEC §19): one reminder per pending call before it expires, however many sweepers
run; a signed "snooze" link moves the deadline back within MAX_EXTENSION."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from agent_core.actors import actor_for_user
from agent_core.models import ToolCall
from approvals import links, reminders
from approvals.exceptions import InvalidDecision
from approvals.models import Delivery, Reminder
from approvals.notify.notice import REMINDED
from tests.conftest import REFUND, at_once, calls_of
from tests.factories import make_user

EMAIL = "approvals.notify.backends.EmailBackend"
SETTINGS = {
    "RULES": {"issue_refund": {"approver": "finance", "ttl": 1800}},
    "NOTIFICATION_BACKENDS": [EMAIL],
    "REMIND_BEFORE": 600,
    "MAX_EXTENSION": {"*": 86400},
}


@pytest.fixture
def fran(db):
    return make_user("fran", "finance", email="fran@example.com")


def due_soon(call: ToolCall) -> None:
    ToolCall.objects.filter(pk=call.pk).update(expires_at=timezone.now() + timedelta(minutes=5))


def reminded(call: ToolCall) -> int:
    return Delivery.objects.filter(tool_call=call, event=REMINDED).count()


@pytest.mark.django_db
@override_settings(APPROVALS=SETTINGS)
def test_one_reminder_when_the_deadline_is_near(turn, fran):
    [call] = calls_of(turn(REFUND))
    assert Reminder.objects.filter(tool_call=call, sent_at=None).exists()
    assert reminders.remind_due() == 0  # 30 minutes left: not yet
    due_soon(call)
    assert reminders.remind_due() == 1
    assert reminded(call) == 1
    assert reminders.remind_due() == 0  # once
    assert reminded(call) == 1


@pytest.mark.django_db
@override_settings(APPROVALS={**SETTINGS, "REMIND_BEFORE": None})
def test_no_reminders_without_remind_before(turn, fran):
    [call] = calls_of(turn(REFUND))
    due_soon(call)
    assert not Reminder.objects.exists() and reminders.remind_due() == 0


@pytest.mark.django_db(transaction=True)
@override_settings(APPROVALS=SETTINGS)
def test_several_sweepers_remind_each_call_once(turn, fran):
    calls = [calls_of(turn(REFUND))[0] for _ in range(4)]
    for call in calls:
        due_soon(call)
    counts = at_once(6, reminders.remind_due)
    assert sum(counts) == 4
    assert [reminded(call) for call in calls] == [1, 1, 1, 1]


@pytest.mark.django_db
@override_settings(APPROVALS=SETTINGS)
def test_the_snooze_link_moves_the_deadline_back(turn, fran):
    [call] = calls_of(turn(REFUND))
    due_soon(call)
    call.refresh_from_db()
    before = call.expires_at
    assert before is not None
    ref = actor_for_user(fran).ref
    snooze = links.decision_links(call, ref, via="email")["snooze"]
    token = snooze.rstrip("/").rsplit("/", 1)[1]
    links.use("snooze", token)
    call.refresh_from_db()
    assert call.expires_at == before + timedelta(seconds=600)
    with override_settings(APPROVALS={**SETTINGS, "MAX_EXTENSION": {"*": 60}}):
        again = links.decision_links(call, ref, via="email")["snooze"].rsplit("/", 1)[1]
        with pytest.raises(InvalidDecision):
            links.use("snooze", again)
