"""Reminders (SPEC §19): one reminder to a pending call's approvers before it expires.

With ``APPROVALS["REMIND_BEFORE"]`` set, the gate stamps a ``Reminder`` on every call that asks
for an approval with a deadline. The sweep (``remind_due``, on every process that sweeps) claims
the due ones with one conditional ``UPDATE`` (``sql.CLAIM_REMINDERS``) and records their
notifications (event ``approval-reminder``) in the same transaction, so however many sweepers
run, each call is reminded once. A reminder's links include "snooze": a signed link that moves
the deadline back (``amendments.snooze_until``), within ``MAX_EXTENSION``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from agent_core.models import ToolCall

from . import sql
from .conf import approvals_settings
from .models import Reminder
from .notify import delivery
from .notify.notice import REMINDED


def stamp(call: ToolCall, expires_at: datetime | None) -> None:
    """Stamp ``call``'s reminder in the suspend transaction when reminders are on and the call
    has a deadline (before the call row itself: the foreign key is checked at commit)."""
    if approvals_settings().remind_before is not None and expires_at is not None:
        Reminder.objects.create(tool_call_id=call.pk)


def remind_due(limit: int = 500) -> int:
    """Send the reminders that are due (the periodic sweep); how many calls were reminded."""
    before = approvals_settings().remind_before
    if before is None:
        return 0
    with transaction.atomic():
        with connection.cursor() as cursor:
            params: dict[str, Any] = {"now": timezone.now(), "before": before, "limit": limit}
            cursor.execute(sql.CLAIM_REMINDERS, params)
            claimed = [row[0] for row in cursor.fetchall()]
        if claimed:
            delivery.record(list(ToolCall.objects.filter(pk__in=claimed)), event=REMINDED)
    return len(claimed)
