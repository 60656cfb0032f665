"""Celery tasks of the approvals app: ids in, the notify module does the work."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from .notify import delivery
from .notify.delivery import DELIVER_TASK


@shared_task(name=DELIVER_TASK, bind=True, acks_late=True, ignore_result=True)
def deliver_notification(self: Any, delivery_id: int) -> None:
    """Try one notification delivery; retried with exponential backoff until it is settled."""
    again = delivery.attempt(delivery_id)
    if again is not None:
        raise self.retry(countdown=again, max_retries=None)
