"""Read queries of the approvals app: what an actor may decide, across all runs."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from agent_core.actors import Actor
from agent_core.models import CallStatus, ToolCall

from .policy import REQUESTER


def pending_for(actor: Actor) -> QuerySet[ToolCall]:
    """Pending approvals and questions this actor may decide, oldest first, in one query.

    Mirrors ``ApprovalPolicy.can_decide`` / ``can_answer`` of the default policy as a filter.
    """
    mine = Q(approver=REQUESTER, requester_ref=actor.ref) | Q(
        status=CallStatus.PENDING_INPUT, requester_ref=actor.ref
    )
    by_role = Q(status=CallStatus.PENDING_APPROVAL, approver__in=sorted(actor.roles))
    return (
        ToolCall.objects.filter(status__in=[CallStatus.PENDING_APPROVAL, CallStatus.PENDING_INPUT])
        .filter(mine | by_role)
        .select_related("run", "thread")
        .order_by("requested_at", "id")
    )
