"""The sweep's side of a notification: a pending delivery whose attempts were lost with their
process or message (a web process that held its retry timer, a flushed queue) is re-scheduled
once its next attempt is a whole lease overdue, never while an attempt's lease runs or its task is
less than a lease late; and when the task it stood for was merely late, one chain goes on."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from agent_core.engine.dispatch import set_runner
from agent_core.runner.inline import InlineRunner
from agent_core.runner.sweep import sweep
from approvals.models import Delivery
from approvals.notify import delivery
from tests.approvals.test_delivery_attempts import DIED, LEASE, claimed, notifying
from tests.conftest import wait_for


def lost(row: Delivery, *, ago: float) -> None:
    """``row`` as recorded ``ago`` seconds ago, its after-commit schedule never run."""
    Delivery.objects.filter(pk=row.pk).update(due_at=timezone.now() - timedelta(seconds=ago))


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("attempts", [0, 1], ids=["never-scheduled", "its-attempt-died"])
def test_the_sweep_sends_a_delivery_whose_attempts_were_lost(pending, receiver, attempts):
    with override_settings(APPROVALS=notifying(receiver)):
        if attempts:
            claimed(pending, attempts=attempts, ago=2 * LEASE + 1)
        else:
            lost(pending, ago=LEASE + 1)
        assert delivery.resume_lost() == 1
        assert delivery.resume_lost() == 0
    pending.refresh_from_db()
    assert (pending.status, pending.attempts, pending.claimed_at) == ("sent", attempts + 1, None)
    assert len(receiver.received) == 1


@pytest.mark.django_db(transaction=True)
def test_the_sweep_leaves_a_delivery_whose_next_attempt_may_still_come(pending, receiver):
    receiver.failures = 1
    with override_settings(APPROVALS=notifying(receiver)):
        assert delivery.resume_lost() == 0  # just recorded: its schedule runs after the commit
        assert delivery.attempt(pending.pk) is not None  # failed: the next after the backoff
        assert delivery.resume_lost() == 0
        claimed(pending, attempts=2, ago=LEASE - 1)  # in the middle of its send
        assert delivery.resume_lost() == 0
        claimed(pending, attempts=2, ago=LEASE + 1)  # died: a redelivered task may come back
        assert delivery.resume_lost() == 0
    pending.refresh_from_db()
    assert (pending.status, pending.attempts) == ("pending", 2)
    assert len(receiver.received) == 1


@pytest.mark.django_db(transaction=True)
def test_a_queued_attempt_just_due_is_left_to_its_message(pending, receiver):
    with override_settings(APPROVALS=notifying(receiver)):
        lost(pending, ago=1)  # its task waits in a busy queue, due a moment ago
        assert delivery.resume_lost() == 0
        lost(pending, ago=LEASE - 1)
        assert delivery.resume_lost() == 0
    assert receiver.received == []


@pytest.mark.django_db(transaction=True)
def test_a_swept_delivery_whose_message_was_merely_late_has_one_chain(pending, receiver):
    # Its first message waited in a backlog for more than a lease: the sweep cannot tell it from
    # a lost one and queues another. Whichever runs first makes the attempt (here it fails and
    # its chain retries after the backoff); the other finds that attempt made and ends, rather
    # than trying at once and carrying on as a second chain of attempts.
    receiver.failures = 1
    runner, busy = InlineRunner(workers=1), threading.Event()
    set_runner(runner)
    try:
        with override_settings(APPROVALS=notifying(receiver)):
            runner.submit(busy.wait)  # the sweep's attempt waits its turn behind the late one
            lost(pending, ago=LEASE + 1)
            assert delivery.resume_lost() == 1
            late = delivery.attempt(pending.pk)  # the first message, at last
            assert late is not None
            busy.set()
            runner.shutdown()  # the sweep's attempt has run
            pending.refresh_from_db()
            assert (pending.status, pending.attempts) == ("pending", 1)
            assert len(receiver.received) == 1
            assert delivery.attempt(pending.pk, late.ticket) is None  # the chain goes on: sent
    finally:
        busy.set()
        runner.shutdown()
        set_runner(None)
    pending.refresh_from_db()
    assert (pending.status, pending.attempts) == ("sent", 2)
    assert len(receiver.received) == 2


@pytest.mark.django_db(transaction=True)
def test_a_swept_delivery_is_not_swept_again_while_its_attempt_waits(pending, receiver):
    runner, busy = InlineRunner(workers=1), threading.Event()
    set_runner(runner)
    try:
        with override_settings(APPROVALS=notifying(receiver)):
            runner.submit(busy.wait)  # the only worker is busy: the swept attempt waits its turn
            lost(pending, ago=LEASE + 1)
            assert delivery.resume_lost() == 1
            assert delivery.resume_lost() == 0
            busy.set()
            wait_for("the delivery", lambda: Delivery.objects.filter(status="sent"))
    finally:
        busy.set()
        runner.shutdown()
        set_runner(None)
    assert len(receiver.received) == 1


@pytest.mark.django_db(transaction=True)
def test_a_sweep_schedules_at_most_its_limit_the_most_overdue_first(pending, receiver):
    other = Delivery.objects.create(
        tool_call=pending.tool_call, event=pending.event, channel=pending.channel
    )
    with override_settings(APPROVALS={**notifying(receiver), "NOTIFICATION_SWEEP_LIMIT": 1}):
        lost(pending, ago=LEASE + 1)
        lost(other, ago=LEASE + 2)
        assert delivery.resume_lost() == 1
        assert Delivery.objects.get(pk=other.pk).status == "sent"
        assert delivery.resume_lost() == 1
        assert delivery.resume_lost() == 0
    assert Delivery.objects.get(pk=pending.pk).status == "sent"
    assert len(receiver.received) == 2


@pytest.mark.django_db(transaction=True)
def test_the_sweeper_fails_a_delivery_whose_attempts_are_used_up(pending, receiver):
    with override_settings(APPROVALS=notifying(receiver)):
        claimed(pending, attempts=3, ago=2 * LEASE + 1, error="DeliveryFailed: HTTP 500: ")
        sweep()  # the sweeper's jobs, this one among them
    pending.refresh_from_db()
    assert (pending.status, pending.attempts, pending.claimed_at) == ("failed", 3, None)
    assert pending.error == f"{DIED}; the last to finish: DeliveryFailed: HTTP 500: "
    assert receiver.received == []
