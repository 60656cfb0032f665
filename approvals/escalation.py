"""Escalation: a call still waiting some time before its deadline is announced to a second role.

The gate stamps an ``Escalation`` (role, ``due_at`` = deadline - ``before``, ``may_decide``) on
calls whose requirement names one. The sweep (the inline runner's thread, or Celery beat) calls
``escalate_due``: under the run's lock, each due call still pending is marked escalated, the
stream says ``approval-escalated``, the audit gets an ``escalate`` row and the role's
notifications are recorded (sent after commit). With ``may_decide`` the role's holders may then
decide the call (``policy``).
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db.models import OuterRef, QuerySet, Subquery
from django.utils import timezone

from agent_core.actors import SYSTEM, Actor
from agent_core.choices import CallStatus
from agent_core.engine import clock, stream_log
from agent_core.engine.access import is_operator
from agent_core.engine.decisions import decision
from agent_core.engine.frames import Frame
from agent_core.exceptions import NotAllowed
from agent_core.models import ToolCall

from .attempts import Entry, Result, audit
from .models import Action, Escalation
from .notify import delivery
from .notify.notice import ESCALATED
from .policy import role_members
from .requirement import Escalate

logger = logging.getLogger(__name__)


def stamp(call: ToolCall, escalate: Escalate, expires_at: datetime) -> None:
    """Record the requirement's escalation for ``call`` (in the suspend transaction, before the
    call row itself: the foreign key is checked at commit)."""
    Escalation.objects.create(
        tool_call_id=call.pk,
        role=escalate.role,
        may_decide=escalate.may_decide,
        due_at=expires_at - escalate.before,
    )


def escalate_due(limit: int = 200) -> int:
    """Escalate every pending call whose escalation is due; returns how many."""
    due = list(
        Escalation.objects.filter(
            escalated_at__isnull=True,
            due_at__lte=clock.now(),
            tool_call__status=CallStatus.PENDING_APPROVAL,
        )
        .order_by("due_at")
        .values_list("tool_call_id", flat=True)[:limit]
    )
    escalated = sum(_escalate(call_id, SYSTEM, via="escalation") for call_id in due)
    if escalated:
        logger.info("sweep escalated %d approval requests", escalated)
    return escalated


def escalate_now(call_id: str, *, actor: Actor, via: str) -> None:
    """An operator escalates a waiting call before its time, to the role its policy names (the
    requirement's ``escalate``): audited as theirs. ``NotAllowed`` for others, and for a call
    with no such role or already escalated; ``NotFound`` for an unknown call."""
    if not is_operator(actor):
        raise NotAllowed("Only an operator may escalate a call.")
    if not Escalation.objects.filter(pk=call_id, escalated_at__isnull=True).exists():
        raise NotAllowed("The policy names no role to escalate this call to, or it was already.")
    if not _escalate(call_id, actor, via=via):
        raise NotAllowed("This call no longer waits for an approval.")


def _escalate(call_id: str, actor: Actor, *, via: str) -> bool:
    with decision(call_id) as held:
        if held is None or held.call.status != CallStatus.PENDING_APPROVAL:
            return False
        run, call = held.run, held.call
        now = timezone.now()
        won = Escalation.objects.filter(pk=call_id, escalated_at__isnull=True).update(
            escalated_at=now
        )
        if not won:
            return False
        escalation = Escalation.objects.get(pk=call_id)
        stream_log.emit(run.pk, [frame(escalation)])
        escalated = Entry.of(call, Action.ESCALATE, actor, via, Result.APPLIED)
        may_decide = " (may decide)" if escalation.may_decide else ""
        audit(escalated.noted(f"escalated to {escalation.role}{may_decide}"))
        delivery.record([call], event=ESCALATED, refs=role_members(frozenset({escalation.role})))
    return True


def with_escalation(calls: QuerySet[ToolCall]) -> QuerySet[ToolCall]:
    """``calls`` annotated with ``escalated_to`` (the role, once escalated), in the same query."""
    role = Escalation.objects.filter(tool_call=OuterRef("pk"), escalated_at__isnull=False)
    return calls.annotate(escalated_to=Subquery(role.values("role")))


def escalated_to(call: ToolCall) -> str:
    """The role ``call`` was escalated to ("" if none), from ``with_escalation`` or a query."""
    if hasattr(call, "escalated_to"):
        return call.escalated_to or ""
    found = Escalation.objects.filter(tool_call_id=call.pk, escalated_at__isnull=False)
    return found.values_list("role", flat=True).first() or ""


def frame(escalation: Escalation) -> Frame:
    """The ``approval-escalated`` frame: the call was still waiting when its escalation fell due,
    so ``role`` was told (and, with ``may_decide``, may decide it too)."""
    assert escalation.escalated_at is not None
    return Frame(
        "approval-escalated",
        {
            "tool_call_id": escalation.tool_call_id,
            "role": escalation.role,
            "may_decide": escalation.may_decide,
            "escalated_at": escalation.escalated_at.isoformat(),
        },
    )
