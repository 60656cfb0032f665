"""Notifications on the durable runner: queued by the worker that parks the run, delivered by a
Celery task that retries with backoff until the receiver takes it."""

from __future__ import annotations

import functools
import os
import signal
import time
from collections.abc import Iterator

import pytest

from agent_core.models import Run
from approvals.models import Delivery
from tests.approvals.receiver import Receiver
from tests.conftest import REFUND, wait_for
from tests.factories import make_user

from .conftest import Cluster, _flush_broker, start

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


@pytest.fixture
def hanging_receiver() -> Iterator[Receiver]:
    """A receiver that never answers: every send is in the middle of it until its worker dies."""
    found = Receiver(hang=True)
    yield found
    found.close()


def sends(receiver: Receiver, count: int) -> bool:
    return len(receiver.received) >= count


def given_up(cluster: Cluster, receiver: Receiver, run: Run) -> Delivery:
    """The run's one delivery once it failed, after three sends and no more."""
    delivery = wait_for(
        "the delivery to give up",
        lambda: Delivery.objects.filter(tool_call__run=run, status="failed").first(),
        cluster,
    )
    time.sleep(3)  # a redelivered task, had one survived, would have sent by now
    assert len(receiver.received) == 3
    assert delivery.attempts == 3
    return delivery


DIED = "gave up after 3 attempts; the last did not finish"


def test_a_notification_whose_worker_is_killed_in_every_send_fails_after_its_attempts(
    cluster: Cluster, hanging_receiver: Receiver
) -> None:
    # The worker's process is SIGKILLed in the middle of each send (as the OOM killer would);
    # Celery hands the task out again each time.
    make_user("fran", "finance", email="fran@example.com")
    worker = cluster.worker(
        pool="prefork",
        AIRLOCK_TEST_WEBHOOK_URL=hanging_receiver.url,
        AIRLOCK_TEST_NOTIFICATION_ATTEMPTS="3",
        AIRLOCK_TEST_NOTIFICATION_LEASE="1",
    )
    run = start(REFUND)
    for count in range(1, 4):
        wait_for(f"send {count}", functools.partial(sends, hanging_receiver, count), cluster)
        os.kill(cluster.pool_child(worker), signal.SIGKILL)
    assert given_up(cluster, hanging_receiver, run).error == DIED


def test_a_notification_whose_sends_hit_the_hard_time_limit_fails_after_its_attempts(
    cluster: Cluster, hanging_receiver: Receiver
) -> None:
    # The task's hard time limit kills each send (the webhook's own timeout is longer): the
    # task is handed out again, as after a SIGKILL, not acknowledged and forgotten.
    make_user("fran", "finance", email="fran@example.com")
    cluster.worker(
        pool="prefork",
        AIRLOCK_TEST_WEBHOOK_URL=hanging_receiver.url,
        AIRLOCK_TEST_NOTIFICATION_ATTEMPTS="3",
        AIRLOCK_TEST_NOTIFICATION_LEASE="1",
        AIRLOCK_TEST_NOTIFY_TIME_LIMIT="2",
    )
    assert given_up(cluster, hanging_receiver, start(REFUND)).error == DIED


def test_a_notification_whose_task_message_was_lost_is_sent_by_the_sweep(
    cluster: Cluster, hanging_receiver: Receiver
) -> None:
    # Its worker dies in the middle of the first send and the broker is flushed, the task's
    # message with it: only the sweep (on beat) knows that the delivery is still to be made.
    make_user("fran", "finance", email="fran@example.com")
    knobs = {
        "AIRLOCK_TEST_WEBHOOK_URL": hanging_receiver.url,
        "AIRLOCK_TEST_NOTIFICATION_LEASE": "1",
    }
    worker = cluster.worker(**knobs)
    run = start(REFUND)
    wait_for("the first send", functools.partial(sends, hanging_receiver, 1), cluster)
    cluster.kill(worker)
    _flush_broker()
    hanging_receiver.release()
    cluster.worker(**knobs)
    cluster.beat()
    delivery = wait_for(
        "the sweep to send it",
        lambda: Delivery.objects.filter(tool_call__run=run, status="sent").first(),
        cluster,
    )
    assert delivery.attempts == 2
    assert len(hanging_receiver.received) == 2
