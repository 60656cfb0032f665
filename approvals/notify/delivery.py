"""Who is told of a waiting call, and the recorded delivery of each notification.

``record`` runs in the transaction that asks for a decision (the suspend transaction, through
the gate's ``requested``; the escalation's), never in a decision's: it writes one ``Delivery``
row per channel (per person for personal channels) with the state it asks for, so the request
and the record of who is told of it commit together. A notification no channel can deliver (a
person without an address) is recorded ``failed`` at once, with why; the others are handed,
after commit, to the runner's side — a Celery task with retries and backoff on the durable
runner, the inline runner's pool (retries on a timer) otherwise. Each attempt is counted before
it sends and its outcome recorded after (``attempts``, ``error``, ``status``), so the console can
show what reached whom, and a notification whose sends never finish still ends ``failed``. One
whose next attempt was lost with its process or message is scheduled again by the sweep
(``resume_lost``). Each scheduled attempt carries a ticket (the row's attempts when it was
scheduled), so that however many copies of it run (a redelivered task, the sweep's for one that
was merely late), one chain of attempts goes on.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta
from typing import NamedTuple

from celery import current_app
from django.db import DatabaseError, transaction
from django.db.models.functions import Now
from django.utils import timezone

from agent_core.conf import agent_settings
from agent_core.engine import rows
from agent_core.engine.dispatch import get_runner
from agent_core.models import ToolCall
from agent_core.runner.inline import InlineRunner

from .. import sql as statements
from ..conf import ApprovalsSettings, approvals_settings
from ..links import links_for
from ..models import Delivery, DeliveryStatus
from ..policy import get_policy
from .backends import NotificationBackend, backend_named, configured_backends
from .notice import REQUESTED, Contact, contact_of, contacts_of, notice_for

logger = logging.getLogger(__name__)

DELIVER_TASK = "approvals.deliver_notification"


class Next(NamedTuple):
    """The next attempt of a delivery's chain: in ``delay`` seconds, holding ``ticket``."""

    delay: float
    ticket: int


def record(
    calls: Sequence[ToolCall], *, event: str = REQUESTED, refs: list[str] | None = None
) -> int:
    """Record the notifications of ``calls`` (to ``refs``, or the policy's recipients) in the
    current transaction, and queue the deliverable ones for after its commit; how many rows.

    A mistake in the settings or the policy is logged, never raised into the run or sweep that
    asks; a database error is raised: the request and its record commit together or not at all.
    """
    try:
        wanted = _rows(calls, event, refs)
    except DatabaseError:
        raise
    except Exception:
        logger.exception("could not record the notifications of %s", [c.pk for c in calls])
        return 0
    if not wanted:
        return 0
    # One statement: the rows, less whoever opted out.
    inserted = rows.fetch_rows(statements.RECORD_DELIVERIES, {"rows": rows.json_rows(wanted)})
    pending = [(row["id"], 0) for row in inserted if row["status"] == DeliveryStatus.PENDING]
    if pending:
        transaction.on_commit(functools.partial(_schedule_all, pending), robust=True)
    return len(inserted)


def _rows(calls: Sequence[ToolCall], event: str, refs: list[str] | None) -> list[Delivery]:
    backends = configured_backends()
    if not backends or not calls:
        return []
    policy = get_policy()
    wanted = {c.pk: policy.recipients(c) if refs is None else refs for c in calls}
    personal = any(backend.per_recipient for backend in backends)
    everyone = {ref for people in wanted.values() for ref in people}
    contacts = contacts_of(everyone) if personal else {}
    deliveries = []
    for call in calls:
        people = list(dict.fromkeys(wanted[call.pk]))
        for backend in backends:
            for ref in people if backend.per_recipient else [""]:
                deliveries.append(_row(call, event, backend, contacts.get(ref)))
    return deliveries


def _row(call: ToolCall, event: str, backend: NotificationBackend, to: Contact | None) -> Delivery:
    """One delivery, settled at once when ``backend`` cannot reach ``to`` at all: nothing is
    sent, there is nothing to retry, and the row says why."""
    row = Delivery(
        tool_call=call, event=event, channel=backend.name, recipient_ref=to.ref if to else ""
    )
    if not backend.accepts(notice_for(call, event, to, {})):
        row.status, row.attempts = DeliveryStatus.FAILED, 1
        row.error = _unreachable(backend, row.recipient_ref)
    return row


def _unreachable(backend: NotificationBackend, ref: str) -> str:
    return f"{backend.name} cannot reach {ref or 'anyone'}"


def _schedule_all(deliveries: Iterable[tuple[int, int]]) -> None:
    # After the commit that asked: a failure to queue is logged, never raised into its caller.
    for delivery_id, ticket in deliveries:
        try:
            schedule(delivery_id, ticket)
        except Exception:
            logger.exception("could not queue notification delivery %s", delivery_id)


def schedule(delivery_id: int, ticket: int = 0) -> None:
    """Hand one delivery attempt to the durable task queue or the inline runner's pool;
    ``ticket``: the row's attempts so far (see ``attempt``)."""
    if agent_settings().RUNNER == "durable":
        # By name, as the project's routes know it (approvals.tasks imports this module).
        current_app.send_task(DELIVER_TASK, args=[delivery_id, ticket])
        return
    runner = get_runner()
    submit = runner.submit if isinstance(runner, InlineRunner) else _call

    def attempt_inline(ticket: int) -> None:
        again = attempt(delivery_id, ticket)
        if again is not None:
            retry = functools.partial(attempt_inline, again.ticket)
            submit_later = threading.Timer(again.delay, submit, args=(retry,))
            submit_later.daemon = True
            submit_later.start()

    submit(functools.partial(attempt_inline, ticket))


def attempt(delivery_id: int, ticket: int = 0) -> Next | None:
    """Try one delivery once and record how it went; when and with which ticket to come back,
    or ``None`` when there is nothing to come back for (sent, failed for good, settled, or the
    attempt made by another task, whose chain goes on).

    The attempt is claimed before anything is sent, in a commit of its own (``CLAIM_DELIVERY``):
    counted, so that an attempt whose process dies while sending (SIGKILL, the OOM killer, a
    hard time limit) still uses up one of ``NOTIFICATION_ATTEMPTS``, and leased, so that of two
    attempts of the same row at once (a redelivered task) one sends and the other comes back
    when the lease is over. ``ticket`` is the row's attempts when this one was scheduled: a task
    whose attempt another made meanwhile (its copy the sweep queued, or the redelivered one once
    the first finished) ends there, so one chain of attempts goes on, at its backoff. The
    outcome is a compare-and-set on the claimed count: an attempt that outlived its lease,
    overtaken by the next, records nothing.
    """
    settings = approvals_settings()
    lease = settings.NOTIFICATION_LEASE
    claimed = rows.fetch_rows(
        statements.CLAIM_DELIVERY,
        {
            "lease": lease,
            "delivery_id": delivery_id,
            "attempts": settings.NOTIFICATION_ATTEMPTS,
            "ticket": ticket,
        },
    )
    if not claimed:
        return _refused(delivery_id, ticket, settings)
    tried = claimed[0]["attempts"]
    row = Delivery.objects.select_related("tool_call").filter(pk=delivery_id).first()
    if row is None:
        return None  # deleted with its call's thread since the claim
    error, final = _send(row)
    final = error is None or final or _used_up(tried, settings)
    status = DeliveryStatus.SENT if error is None else DeliveryStatus.FAILED
    backoff = settings.NOTIFICATION_BACKOFF * 2 ** (tried - 1)
    counted = Delivery.objects.filter(
        pk=row.pk, status=DeliveryStatus.PENDING, attempts=tried
    ).update(
        status=status if final else DeliveryStatus.PENDING,
        error=error or "",
        sent_at=timezone.now() if error is None else None,
        claimed_at=None,
        due_at=Now() + timedelta(seconds=backoff),
    )
    if error is not None:
        logger.warning(
            "notification %s of %s via %s, attempt %s: %s",
            row.event,
            row.tool_call_id,
            row.channel,
            tried,
            error,
        )
    return None if not counted or final else Next(backoff, tried)


def resume_lost() -> int:
    """Schedule again the pending deliveries whose attempts were lost (a sweep job); how many.

    The next attempt of a delivery waits in one process's timer (the inline runner) or one task
    message (the durable runner): when that process dies or the message is lost (a flushed
    broker, a failure to queue after commit), nothing else would try the row again. One whose
    next attempt (``due_at``) is a whole lease overdue has lost it — the lease bounds how late an
    attempt may start or finish — and is scheduled again, at most ``NOTIFICATION_SWEEP_LIMIT``
    per sweep. A task merely late by a lease (a backed-up queue) looks the same: the one
    scheduled here carries the same ticket, so whichever claims first makes the attempt and the
    other ends; and each time the sweep schedules a row whose attempts do not start, it waits
    twice as long before the next (from a lease to ``NOTIFICATION_SWEEP_BACKOFF_MAX``; a claim
    starts it over), so a long backlog gets a few copies of each delivery, not one every other
    lease, while copies that were lost too are followed by others. The claim still keeps two
    attempts from sending at once, and one whose attempts are used up fails, saying why.
    """
    settings = approvals_settings()
    lease, limit = settings.NOTIFICATION_LEASE, settings.NOTIFICATION_SWEEP_LIMIT
    longest = settings.NOTIFICATION_SWEEP_BACKOFF_MAX
    found = rows.fetch_rows(
        statements.RESUME_LOST, {"longest": longest, "lease": lease, "limit": limit}
    )
    lost = [(row["id"], row["attempts"]) for row in found]
    if lost:
        transaction.on_commit(functools.partial(_schedule_all, lost), robust=True)
    return len(lost)


def _refused(delivery_id: int, ticket: int, settings: ApprovalsSettings) -> Next | None:
    """Why no attempt could be claimed, and what follows: another attempt's lease still runs
    (come back when it is over: it may have died), another attempt was made since (its own
    retries follow: ``None``), the row is settled (``None``), or every attempt is used up: the
    row fails, saying why — an attempt that died is only known by its lease running out."""
    found = rows.fetch_rows(
        statements.CLAIM_REFUSED,
        {"lease": settings.NOTIFICATION_LEASE, "delivery_id": delivery_id},
    )
    if not found:
        return None
    [row] = found
    attempts, unfinished = row["attempts"], row["unfinished"]
    lease_left, last_error = row["lease_left"], row["error"]
    used_up = _used_up(attempts, settings)
    if lease_left > 0 or (unfinished and not used_up):
        return Next(float(lease_left), ticket)
    if not used_up:
        return None
    error = _given_up(attempts, unfinished=unfinished, last_error=last_error)
    if Delivery.objects.filter(
        pk=delivery_id, status=DeliveryStatus.PENDING, attempts=attempts
    ).update(status=DeliveryStatus.FAILED, error=error, claimed_at=None):
        logger.warning("notification delivery %s: %s", delivery_id, error)
    return None


def _used_up(attempts: int, settings: ApprovalsSettings) -> bool:
    """Whether a delivery that made ``attempts`` gives up: the one rule of it (the claim is
    handed the same ``NOTIFICATION_ATTEMPTS``, and counts no attempt past it)."""
    return attempts >= settings.NOTIFICATION_ATTEMPTS


def _given_up(attempts: int, *, unfinished: bool, last_error: str) -> str:
    why = f"gave up after {attempts} attempt{'s' if attempts != 1 else ''}"
    if unfinished:
        why += "; the last did not finish"
    return f"{why}; the last to finish: {last_error}" if last_error else why


def _send(row: Delivery) -> tuple[str | None, bool]:
    """Send ``row``'s notice: ``(None, _)`` when it went out, else the error and whether trying
    again is pointless."""
    backend = backend_named(row.channel)
    if backend is None:
        return f"no notification backend named {row.channel!r} any more", True
    recipient: Contact | None = contact_of(row.recipient_ref) if row.recipient_ref else None
    links: dict[str, str] = {}
    if recipient is not None and backend.via:
        links = links_for(row.tool_call, recipient.ref, via=backend.via)
    notice = notice_for(row.tool_call, row.event, recipient, links)
    if not backend.accepts(notice):  # the address was removed since the row was recorded
        return _unreachable(backend, row.recipient_ref), True
    try:
        backend.send(notice)
    except Exception as exc:  # any failure of a channel is recorded, never raised into a run
        return f"{type(exc).__name__}: {exc}", False
    return None, False


def _call(fn: Callable[[], object]) -> None:
    fn()
