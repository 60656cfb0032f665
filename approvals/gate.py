"""The approval gate the loop reaches through ``AGENT["APPROVAL_GATE"]``, or, that setting left
unset, because ``ApprovalsConfig`` declares it (``agent_core.extensions``)."""

from __future__ import annotations

from collections.abc import Sequence

from django.contrib.auth import get_user_model
from django.db.models import Q

from agent_core.actors import Actor, actor_for_user
from agent_core.choices import CallStatus
from agent_core.engine import clock
from agent_core.gate import TextReply, Verdict
from agent_core.models import Thread, ToolCall
from agent_core.tools import ToolSpec

from . import cases, escalation, grants, guards, quorum, reminders, services, text_decisions
from .notify import delivery
from .policy import get_policy


class ApprovalGate:
    """Asks the policy, honours remembered approvals, stamps escalations and quorums.

    ``review`` runs inside the suspend transaction: its answer is stamped on the call and never
    re-derived, so a policy changed while the run waits does not re-decide the call. A call that
    asks for a decision gets its tool's one-line summary stamped too, so the console shows it
    without running tool code.
    """

    def review(self, call: ToolCall, *, tool: ToolSpec, actor: Actor, thread: Thread) -> Verdict:
        requirement = get_policy().requirement_for(tool, call.args, actor, thread)
        if not requirement.required:
            return Verdict(required=False)
        call.summary = tool.summarize(guards.tool_context(call, actor, thread), call.args)
        call.amount = tool.amount_of(call.args)
        approver = requirement.stored_approver
        expires_at = clock.now() + requirement.ttl if requirement.ttl else None
        if requirement.escalate is not None and expires_at is not None:
            escalation.stamp(call, requirement.escalate, expires_at)
        if requirement.quorum > 1:
            # A standing yes is one person's: it never stands in for several.
            quorum.stamp(call, requirement)
        elif tool.rememberable:
            granted_by = grants.cover(call)
            if granted_by is not None:
                return Verdict(required=True, approver=approver, remembered_by_ref=granted_by)
        reminders.stamp(call, expires_at)
        return Verdict(required=True, approver=approver, expires_at=expires_at)

    def requested(self, calls: Sequence[ToolCall]) -> None:
        """Record the notifications of ``calls`` with their request (``notify.delivery``)."""
        delivery.record(calls)

    def may_run(self, call: ToolCall, *, tool: ToolSpec) -> str:
        """The requester re-resolved (a Django user must still exist and be active, with the
        roles they hold now) and the policy's ``may_run`` asked again."""
        actor = requester_of(call.requester_ref)
        if actor is None:
            return f"the requester {call.requester_ref} is no longer an active user"
        if not get_policy().may_run(actor, call, tool):
            return f"the policy no longer lets {actor.ref} run {tool.name}"
        return ""

    def proposal_ended(self, call: ToolCall) -> None:
        """A proposal approved with ``remember`` grants later calls once it ran."""
        if call.remember and call.status == CallStatus.SUCCEEDED:
            services.grant_remembered(call)

    def decide_by_text(self, actor: Actor, thread: Thread, text: str) -> TextReply | None:
        return text_decisions.decide(actor, thread, text)

    def decidable(self, actor: Actor) -> Q:
        """What the policy lets ``actor`` decide now, and the calls escalated to its roles with
        the power to decide (decided or not: it may follow what it decided)."""
        return get_policy().decidable(actor) | cases.escalated(actor)


def requester_of(ref: str) -> Actor | None:
    """The actor behind ``ref`` now: a Django user (``user:<pk>``) with their current groups, or
    ``None`` when that user is gone or inactive; any other ref (not a Django user) as it is."""
    kind, _, pk = ref.partition(":")
    if kind != "user" or not pk.isdigit():
        return Actor(ref=ref)
    user = get_user_model().objects.filter(pk=pk, is_active=True).first()
    return actor_for_user(user) if user is not None else None
