"""Celery tasks of the approvals app: ids in, the notify module does the work."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from .notify import delivery
from .notify.delivery import DELIVER_TASK


# A send killed at the task's hard time limit is handed out again, as after a SIGKILL of its
# worker (task_reject_on_worker_lost), rather than acknowledged and forgotten: the attempt was
# counted before it sent, so the next claim retries it or gives the delivery up, saying why.
# (Celery 5.7 reads this as acks_on_timeout=False and requeues at once; a task that raises is
# still dropped, as acknowledged; Celery 5.4 leaves the message to the visibility timeout.)
@shared_task(
    name=DELIVER_TASK,
    bind=True,
    acks_late=True,
    acks_on_failure_or_timeout=False,
    ignore_result=True,
)
def deliver_notification(self: Any, delivery_id: int, ticket: int = 0) -> None:
    """Try one notification delivery; retried with exponential backoff until it is settled
    (``ticket``: see ``delivery.attempt``; a message queued before there were tickets has 0)."""
    again = delivery.attempt(delivery_id, ticket)
    if again is not None:
        raise self.retry(args=[delivery_id, again.ticket], countdown=again.delay, max_retries=None)
