"""The sweep in front of a backed-up queue: a delivery whose task waits in a backlog longer than a
lease looks lost, and the sweep queues a copy of it; while nothing of it runs, each copy it
queues makes it wait twice as long before the next (``NOTIFICATION_SWEEP_BACKOFF_MAX`` at most),
so a long backlog adds a handful of copies per delivery, not one every other lease, and a
delivery whose copies were all lost is still sent."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db.models import F
from django.test import override_settings

from approvals.models import Delivery
from approvals.notify import delivery
from tests.approvals.test_delivery_attempts import LEASE, notifying
from tests.approvals.test_delivery_sweep import lost


def sweeps_over(row: Delivery, periods: int, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Sweep once a lease for ``periods`` leases while nothing queued runs (the queue is backed
    up); in which periods the sweep queued a copy of ``row``, each with the ticket of the attempt
    it stands for (``row.attempts``)."""
    queued: list[tuple[int, int]] = []
    monkeypatch.setattr(delivery, "schedule", lambda pk, ticket=0: queued.append((pk, ticket)))
    copies = []
    for period in range(periods):
        if delivery.resume_lost():
            copies.append(period)
        # A lease goes by: the row's times move a lease into the past.
        Delivery.objects.filter(pk=row.pk).update(due_at=F("due_at") - timedelta(seconds=LEASE))
    monkeypatch.undo()
    assert queued == [(row.pk, row.attempts)] * len(copies)
    return copies


@pytest.mark.django_db(transaction=True)
def test_a_backed_up_queue_gets_a_handful_of_copies_not_one_every_other_lease(
    pending, receiver, monkeypatch
):
    with override_settings(
        APPROVALS={**notifying(receiver), "NOTIFICATION_SWEEP_BACKOFF_MAX": 1000 * LEASE}
    ):
        lost(pending, ago=LEASE + 1)  # its first task waits in the backlog, a lease overdue
        # Each copy makes it due again after a wait doubling from a lease, then a lease's grace.
        assert sweeps_over(pending, 64, monkeypatch) == [0, 2, 5, 10, 19, 36]
    pending.refresh_from_db()
    assert (pending.status, pending.attempts, pending.sweeps) == ("pending", 0, 6)
    assert receiver.received == []


@pytest.mark.django_db(transaction=True)
def test_a_delivery_whose_copies_are_lost_is_still_sent_within_the_backoff_max(
    pending, receiver, monkeypatch
):
    receiver.failures = 1
    with override_settings(
        APPROVALS={**notifying(receiver), "NOTIFICATION_SWEEP_BACKOFF_MAX": 2 * LEASE}
    ):
        lost(pending, ago=LEASE + 1)
        # Its message and every copy were lost (a broker flushed again and again): one copy at
        # least every backoff max and a lease.
        assert sweeps_over(pending, 12, monkeypatch) == [0, 2, 5, 8, 11]
        again = delivery.attempt(pending.pk)  # the last copy runs at last: it fails
        assert again is not None
        pending.refresh_from_db()
        assert (pending.attempts, pending.sweeps) == (1, 0)  # an attempt: the backoff starts over
        lost(pending, ago=LEASE + 1)  # its retry was lost too
        assert sweeps_over(pending, 3, monkeypatch) == [0, 2]
        assert delivery.attempt(pending.pk, again.ticket) is None  # sent
        assert delivery.attempt(pending.pk) is None  # the first message, late: it ends
        assert delivery.resume_lost() == 0
    pending.refresh_from_db()
    assert (pending.status, pending.attempts, pending.sweeps) == ("sent", 2, 0)
    assert len(receiver.received) == 2
