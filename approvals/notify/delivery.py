"""Who is told of a waiting call, and the recorded delivery of each notification.

``notify`` runs after the suspend (or escalation) commits, never in a decision's transaction:
it writes one ``Delivery`` row per channel (per person for personal channels) and hands each to
the runner's side — a Celery task with retries and backoff on the durable runner, the inline
runner's pool (retries on a timer) otherwise. Each attempt is recorded (``attempts``, ``error``,
``status``) so the console can show what reached whom.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any

from celery import current_app
from django.db import transaction
from django.utils import timezone

from agent_core.conf import agent_settings
from agent_core.dispatch import get_runner
from agent_core.models import ToolCall
from agent_core.runner.inline import InlineRunner

from ..conf import approvals_settings
from ..links import decision_links
from ..models import Delivery, DeliveryStatus, NotificationOptOut
from ..policy import get_policy
from .backends import backend_named, configured_backends
from .notice import REQUESTED, Contact, contact_of, notice_for

logger = logging.getLogger(__name__)

DELIVER_TASK = "approvals.deliver_notification"


def notify(call: ToolCall, *, event: str = REQUESTED, refs: list[str] | None = None) -> int:
    """Queue the notifications of ``call`` (to ``refs``, or the policy's recipients); how many."""
    backends = configured_backends()
    if not backends:
        return 0
    wanted = get_policy().recipients(call) if refs is None else refs
    opted_out = set(
        NotificationOptOut.objects.filter(actor_ref__in=wanted).values_list("actor_ref", flat=True)
    )
    people = [ref for ref in dict.fromkeys(wanted) if ref not in opted_out]
    rows = [
        Delivery(tool_call=call, event=event, channel=backend.name, recipient_ref=ref)
        for backend in backends
        for ref in (people if backend.per_recipient else [""])
    ]
    if not rows:
        return 0
    with transaction.atomic():
        Delivery.objects.bulk_create(rows)
        for row in rows:
            transaction.on_commit(functools.partial(schedule, row.pk))
    return len(rows)


def notify_after_commit(call: ToolCall, **options: Any) -> None:
    """``notify`` once the current transaction commits; a failure to queue is logged, never
    raised into the run, decision or sweep that caused it."""

    def queue() -> None:
        try:
            notify(call, **options)
        except Exception:
            logger.exception("could not queue the notifications of %s", call.pk)

    transaction.on_commit(queue)


def schedule(delivery_id: int) -> None:
    """Hand one delivery attempt to the durable task queue or the inline runner's pool."""
    if agent_settings().RUNNER == "durable":
        # By name, as the project's routes know it (approvals.tasks imports this module).
        current_app.send_task(DELIVER_TASK, args=[delivery_id])
        return
    runner = get_runner()
    submit = runner.submit if isinstance(runner, InlineRunner) else _call

    def attempt_inline() -> None:
        again = attempt(delivery_id)
        if again is not None:
            submit_later = threading.Timer(again, submit, args=(attempt_inline,))
            submit_later.daemon = True
            submit_later.start()

    submit(attempt_inline)


def attempt(delivery_id: int) -> float | None:
    """Try one delivery once and record how it went; the delay before the next attempt, or
    ``None`` when there is none to make (sent, failed for good, or already settled)."""
    with transaction.atomic():
        row = (
            Delivery.objects.select_for_update(skip_locked=True)
            .select_related("tool_call")
            .filter(pk=delivery_id, status=DeliveryStatus.PENDING)
            .first()
        )
        if row is None:
            return None  # settled, or another attempt holds it right now
        row.attempts += 1
        Delivery.objects.filter(pk=row.pk).update(attempts=row.attempts)
    error, final = _send(row)
    settings = approvals_settings()
    if error is None:
        Delivery.objects.filter(pk=row.pk).update(
            status=DeliveryStatus.SENT, error="", sent_at=timezone.now()
        )
        return None
    final = final or row.attempts >= settings.NOTIFICATION_ATTEMPTS
    Delivery.objects.filter(pk=row.pk).update(
        status=DeliveryStatus.FAILED if final else DeliveryStatus.PENDING, error=error
    )
    logger.warning(
        "notification %s of %s via %s, attempt %s: %s",
        row.event,
        row.tool_call_id,
        row.channel,
        row.attempts,
        error,
    )
    return None if final else settings.NOTIFICATION_BACKOFF * 2 ** (row.attempts - 1)


def _send(row: Delivery) -> tuple[str | None, bool]:
    """Send ``row``'s notice: ``(None, _)`` when it went out, else the error and whether trying
    again is pointless."""
    backend = backend_named(row.channel)
    if backend is None:
        return f"no notification backend named {row.channel!r} any more", True
    recipient: Contact | None = contact_of(row.recipient_ref) if row.recipient_ref else None
    links: dict[str, str] = {}
    if recipient is not None and backend.via:
        links = decision_links(row.tool_call, recipient.ref, via=backend.via)
    notice = notice_for(row.tool_call, row.event, recipient, links)
    if not backend.accepts(notice):
        return f"{backend.name} cannot reach {row.recipient_ref or 'anyone'}", True
    try:
        backend.send(notice)
    except Exception as exc:  # any failure of a channel is recorded, never raised into a run
        return f"{type(exc).__name__}: {exc}", False
    return None, False


def _call(fn: Callable[[], object]) -> None:
    fn()
