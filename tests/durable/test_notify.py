"""Notifications on the durable runner: queued by the worker that parks the run, delivered by a
Celery task that retries with backoff until the receiver takes it."""

from __future__ import annotations

import functools
import os
import signal
import time
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


def received(receiver: Receiver, count: int) -> bool:
    return len(receiver.received) >= count


def test_a_notification_whose_worker_dies_in_every_send_fails_after_its_attempts(
    cluster: Cluster,
) -> None:
    # A send that never finishes: each time, the worker's process is SIGKILLed in the middle of
    # it (as the OOM killer or a hard time limit would); Celery hands the task out again.
    receiver = Receiver(hang=True)
    make_user("fran", "finance", email="fran@example.com")
    worker = cluster.worker(
        pool="prefork",
        AIRLOCK_TEST_WEBHOOK_URL=receiver.url,
        AIRLOCK_TEST_NOTIFICATION_ATTEMPTS="3",
        AIRLOCK_TEST_NOTIFICATION_LEASE="1",
    )
    try:
        run = start(REFUND)
        for sends in range(1, 4):
            wait_for(f"send {sends}", functools.partial(received, receiver, sends), cluster)
            os.kill(cluster.pool_child(worker), signal.SIGKILL)
        delivery = wait_for(
            "the delivery to give up",
            lambda: Delivery.objects.filter(tool_call__run=run, status="failed").first(),
            cluster,
        )
        time.sleep(3)  # a redelivered task, had one survived, would have sent by now
        assert len(receiver.received) == 3
    finally:
        receiver.close()
    assert delivery.attempts == 3
    assert delivery.error == "gave up after 3 attempts; the last did not finish"
