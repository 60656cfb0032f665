"""Notifications on the durable runner: queued by the worker that parks the run, delivered by a
Celery task that retries with backoff until the receiver takes it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from approvals.models import Delivery
from tests.approvals.receiver import Receiver
from tests.conftest import REFUND, wait_for
from tests.factories import make_user

from .conftest import Cluster, start

pytestmark = pytest.mark.slow


@pytest.fixture
def flaky_receiver() -> Iterator[Receiver]:
    found = Receiver(failures=2)
    yield found
    found.close()


def test_a_webhook_that_fails_twice_is_retried_by_the_task_and_recorded(
    cluster: Cluster, flaky_receiver: Receiver
) -> None:
    make_user("fran", "finance", email="fran@example.com")
    cluster.worker(AIRLOCK_TEST_WEBHOOK_URL=flaky_receiver.url)
    run = start(REFUND)

    def sent() -> bool:
        return Delivery.objects.filter(tool_call__run=run, status="sent").exists()

    wait_for("the notification to be delivered", sent, cluster)
    delivery = Delivery.objects.get()
    assert (delivery.attempts, delivery.event, delivery.error) == (3, "approval-requested", "")
    assert len(flaky_receiver.received) == 3
    assert all(hit["verified"] for hit in flaky_receiver.received)
