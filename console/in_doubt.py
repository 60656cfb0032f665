"""Calls a crash left ``in_doubt``: which they are, and what became of one that left.

Resolving them (mark done / not done) is the approval port's job
(``approvals.services.mark_done`` / ``mark_not_done``): it authorises with the policy's
``can_decide``, resolves, re-asks for approval when the tool's ``approval_scope`` is
``"attempt"``, and audits every attempt.
"""

from __future__ import annotations

from django.db.models import QuerySet
from django.utils import timezone
from django.utils.timesince import timesince

from agent_core.actors import Actor
from agent_core.choices import CallStatus
from agent_core.engine.access import visible_calls
from agent_core.models import ToolCall
from approvals.models import Action, DecisionAttempt

from .people import name_of


def in_doubt_calls(actor: Actor) -> QuerySet[ToolCall]:
    """Every call the actor may see waiting on a person to say whether its side effect
    happened, oldest first."""
    return (
        visible_calls(actor)
        .filter(status=CallStatus.IN_DOUBT)
        .select_related("run", "thread")
        .order_by("requested_at")
    )


def _resolutions(call: ToolCall) -> QuerySet[DecisionAttempt]:
    return DecisionAttempt.objects.filter(
        tool_call_id=call.pk,
        action__in=[Action.MARK_DONE, Action.MARK_NOT_DONE],
        outcome="applied",
    ).order_by("-created_at")


def was_resolved(call: ToolCall) -> bool:
    """Whether a person marked ``call`` done or not done (it was in doubt once)."""
    return _resolutions(call).exists()


def explain_resolved(call: ToolCall) -> str:
    """Why a call can no longer be marked done or not done, in the words an operator needs."""
    status = call.status.replace("_", " ")
    resolution = _resolutions(call).first()
    if resolution is None:
        return f"This call is no longer in doubt: it is {status}."
    said = "done" if resolution.action == Action.MARK_DONE else "not done"
    ago = timesince(resolution.created_at, timezone.now())
    who = name_of(resolution.actor_ref)
    return f"{who} marked this {said} {ago} ago (via {resolution.via}); it is now {status}."
