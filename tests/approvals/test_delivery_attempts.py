"""A notification's attempts: each is claimed (counted and leased) before it sends, so attempts
that never finish still use up ``NOTIFICATION_ATTEMPTS``, and two at once send once."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from agent_core.engine.dispatch import set_runner
from agent_core.runner.inline import InlineRunner
from approvals.checks import check_approvals_settings
from approvals.models import Delivery
from approvals.notify import delivery
from tests.approvals.receiver import SECRET, Receiver
from tests.conftest import wait_for

LEASE = 30.0
DIED = "gave up after 3 attempts; the last did not finish"


def notifying(receiver: Receiver, *, lease: float = LEASE) -> dict[str, object]:
    """Settings that notify ``receiver`` by webhook, three attempts at most."""
    hook = {"URL": receiver.url, "SECRET": SECRET, "TIMEOUT": 5}
    return {
        "NOTIFICATION_BACKENDS": [
            {"BACKEND": "approvals.notify.backends.WebhookBackend", "OPTIONS": hook}
        ],
        "NOTIFICATION_ATTEMPTS": 3,
        "NOTIFICATION_BACKOFF": 0.05,
        "NOTIFICATION_LEASE": lease,
    }


def claimed(
    row: Delivery, *, attempts: int, ago: float, error: str = "", lease: float = LEASE
) -> Delivery:
    """``row`` as attempts left it: the last one claimed ``ago`` seconds ago and not finished."""
    row.attempts, row.error = attempts, error
    row.claimed_at = timezone.now() - timedelta(seconds=ago)
    row.due_at = row.claimed_at + timedelta(seconds=lease)
    row.save()
    return row


@pytest.mark.django_db(transaction=True)
def test_two_attempts_at_once_send_once(pending):
    receiver = Receiver(hang=True)  # the first attempt is in the middle of its send
    outcome: list[delivery.Next | None] = []

    def first() -> None:
        try:
            outcome.append(delivery.attempt(pending.pk))
        finally:
            connection.close()

    try:
        with override_settings(APPROVALS=notifying(receiver)):
            sending = threading.Thread(target=first)
            sending.start()
            wait_for("the first send", lambda: receiver.received)
            # A redelivered task: the lease is the first attempt's, so it comes back at its end.
            again = delivery.attempt(pending.pk)
            assert len(receiver.received) == 1
            assert again is not None and 0 < again.delay <= LEASE
            receiver.release()
            sending.join()
            assert delivery.attempt(pending.pk) is None  # settled
    finally:
        receiver.close()
    pending.refresh_from_db()
    assert (pending.status, pending.attempts, pending.claimed_at) == ("sent", 1, None)
    assert outcome == [None] and len(receiver.received) == 1


@pytest.mark.django_db(transaction=True)
def test_an_attempt_that_died_is_counted_once_its_lease_is_over(pending, receiver):
    with override_settings(APPROVALS=notifying(receiver)):
        claimed(pending, attempts=1, ago=1)
        again = delivery.attempt(pending.pk)  # its lease runs: come back then
        assert again is not None and LEASE - 5 < again.delay < LEASE
        assert receiver.received == []
        claimed(pending, attempts=1, ago=LEASE + 1)
        assert delivery.attempt(pending.pk) is None
    pending.refresh_from_db()
    assert (pending.status, pending.attempts, pending.error) == ("sent", 2, "")
    assert len(receiver.received) == 1


@pytest.mark.django_db(transaction=True)
def test_a_redelivered_attempt_ends_when_the_one_it_waited_for_finishes(pending, receiver):
    # A redelivered task waits out the lease of the attempt in flight; that attempt then fails
    # and its own task retries after the backoff: the redelivered one must not try at once.
    with override_settings(APPROVALS=notifying(receiver)):
        claimed(pending, attempts=1, ago=1)  # the first message's attempt, in its send
        again = delivery.attempt(pending.pk)  # its redelivered copy: come back after the lease
        assert again is not None
        Delivery.objects.filter(pk=pending.pk).update(
            claimed_at=None, error="DeliveryFailed: HTTP 500: ", due_at=timezone.now()
        )  # it finished, failing; its task retries
        assert delivery.attempt(pending.pk) is None
        assert receiver.received == []
        assert delivery.attempt(pending.pk, 1) is None  # the first message's retry: sent
    pending.refresh_from_db()
    assert (pending.status, pending.attempts) == ("sent", 2)
    assert len(receiver.received) == 1


@pytest.mark.django_db(transaction=True)
def test_attempts_used_up_by_ones_that_died_fail_the_row_saying_why(pending, receiver):
    with override_settings(APPROVALS=notifying(receiver)):
        claimed(pending, attempts=3, ago=LEASE + 1, error="DeliveryFailed: HTTP 500: ")
        assert delivery.attempt(pending.pk) is None
        assert delivery.attempt(pending.pk) is None  # settled: nothing more
    pending.refresh_from_db()
    assert (pending.status, pending.attempts, pending.claimed_at) == ("failed", 3, None)
    assert pending.error == f"{DIED}; the last to finish: DeliveryFailed: HTTP 500: "
    assert receiver.received == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("attempts", "status", "sends", "error"),
    [(2, 500, 1, "DeliveryFailed: HTTP 500: "), (3, 200, 0, DIED)],
    ids=["the-last-attempt-sends", "no-attempt-left"],
)
def test_the_inline_runner_comes_back_when_a_dead_attempts_lease_is_over(
    pending, receiver, attempts, status, sends, error
):
    receiver.status = status
    runner = InlineRunner(workers=2)
    set_runner(runner)
    try:
        with override_settings(APPROVALS=notifying(receiver, lease=0.5)):
            claimed(pending, attempts=attempts, ago=0, lease=0.5)
            delivery.schedule(pending.pk)
            wait_for("the delivery to fail", lambda: Delivery.objects.filter(status="failed"))
    finally:
        runner.shutdown()
        set_runner(None)
    pending.refresh_from_db()
    assert (pending.attempts, pending.error) == (3, error)
    assert len(receiver.received) == sends


@pytest.mark.parametrize(
    "setting",
    [
        {"NOTIFICATION_ATTEMPTS": 0},
        {"NOTIFICATION_LEASE": 0},
        {"NOTIFICATION_SWEEP_LIMIT": 0},
        {"NOTIFICATION_SWEEP_LIMIT": 2.5},
        {"NOTIFICATION_SWEEP_BACKOFF_MAX": 59},  # below the lease (60)
        {"NOTIFICATION_SWEEP_BACKOFF_MAX": "1h"},
    ],
)
def test_no_attempts_no_lease_or_no_sweep_is_reported(setting):
    with override_settings(APPROVALS=setting):
        [error] = check_approvals_settings()
    assert error.id == "approvals.E001"
