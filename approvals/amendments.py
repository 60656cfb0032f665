"""After the request: a later deadline for a pending call (``extend``) and the end of a remembered
approval (``revoke``). Both go through the approval port's audit like every decision."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from agent_core.actors import Actor
from agent_core.choices import CallStatus
from agent_core.conf import agent_settings
from agent_core.engine import clock
from agent_core.engine.access import visible_threads
from agent_core.exceptions import AgentCoreError, NotFound
from agent_core.models import ToolCall

from . import guards
from .attempts import Attempt, Entry, Outcome, Result, attempt, audit, check_deadline, conflict
from .conf import approvals_settings
from .exceptions import InvalidDecision, NotApprover
from .models import Action, RememberedApproval
from .policy import get_policy


def extend(
    tool_call_id: str,
    *,
    actor: Actor,
    ttl: timedelta | None = None,
    expires_at: datetime | None = None,
    via: str = "web",
) -> Outcome:
    """Give a pending request a later deadline (``ttl`` from now, or ``expires_at``); audited.
    The outcome's call has the new deadline.

    Only someone who may decide the call may extend it, at most the policy's ``max_extension``
    past now (default: the ttl the policy gives the call); a request already past its deadline
    expires instead (410).
    """
    if (ttl is None) == (expires_at is None):
        raise InvalidDecision("give either ttl or expires_at")

    def decide(current: Attempt) -> Result:
        held = current.decision
        run, call = held.run, held.call
        if not get_policy().can_decide(actor, call):
            raise NotApprover()
        if call.status != CallStatus.PENDING_APPROVAL:
            raise conflict(run, call)
        check_deadline(held)
        if call.expires_at is None:
            raise InvalidDecision("this request has no deadline to extend")
        now = clock.now()
        deadline = expires_at if expires_at is not None else now + (ttl or timedelta())
        if deadline <= call.expires_at:
            raise InvalidDecision(f"the new deadline must be after {call.expires_at.isoformat()}")
        limit = guards.extension_limit(run, call)
        if deadline > now + limit:
            raise InvalidDecision(f"a deadline may be moved at most {limit} past now")
        current.note = f"expires_at {call.expires_at.isoformat()} -> {deadline.isoformat()}"
        held.extend(deadline)
        return Result.APPLIED

    return attempt(tool_call_id, Action.EXTEND, actor, via, decide)


def snooze_until(call: ToolCall, now: datetime) -> datetime:
    """The deadline a snooze (a reminder's signed link) asks for: ``REMIND_BEFORE`` (an hour
    without it) past the current deadline; ``extend`` refuses one beyond ``MAX_EXTENSION``."""
    step = approvals_settings().remind_before or timedelta(hours=1)
    return max(call.expires_at or now, now) + step


def revoke(remembered_id: int, *, actor: Actor, via: str = "web") -> Result:
    """Revoke a remembered approval: later calls of its tool in its thread ask again; audited.

    The thread's owner, the grant's granter and operators (``AGENT["OPERATOR_ROLE"]``) may.
    """
    guards.check_via(via)
    with transaction.atomic():
        grant = (
            RememberedApproval.objects.select_for_update()
            .select_related("thread")
            .filter(pk=remembered_id)
            .first()
        )
        refusal: AgentCoreError | None = None
        outcome: Result | None = None
        if grant is None:
            refusal = NotFound(f"no remembered approval {remembered_id}")
        elif actor.ref not in (grant.granted_by_ref, grant.thread.owner_ref) and not actor.has_role(
            agent_settings().OPERATOR_ROLE
        ):
            # 403 for whoever sees the thread; to anyone else the grant is unknown (SPEC §7).
            refusal = (
                NotApprover("only the thread's owner, the granter or an operator may revoke")
                if visible_threads(actor).filter(pk=grant.thread_id).exists()
                else NotFound(f"no remembered approval {remembered_id}")
            )
        elif grant.revoked_at is not None:
            outcome = Result.UNCHANGED
        else:
            RememberedApproval.objects.filter(pk=grant.pk, revoked_at__isnull=True).update(
                revoked_at=timezone.now(), revoked_by_ref=actor.ref
            )
            outcome = Result.APPLIED
        detail = f"remembered approval {remembered_id}"
        audit(
            Entry(
                grant.source_tool_call_id or "" if grant else "",
                Action.REVOKE,
                actor.ref,
                via,
                outcome.value if outcome else refusal.code if refusal else "",
                detail + (f": {refusal.message}" if refusal else ""),
                thread_id=grant.thread_id if grant else "",
                tool_name=grant.tool_name if grant else "",
            )
        )
    if refusal is not None:
        raise refusal
    assert outcome is not None
    return outcome
