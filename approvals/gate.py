"""The approval gate the loop reaches through ``AGENT["APPROVAL_GATE"]``, or, that setting left
unset, because ``ApprovalsConfig`` declares it (``agent_core.extensions``)."""

from __future__ import annotations

from collections.abc import Sequence

from django.db.models import Q
from django.utils import timezone

from agent_core import rows
from agent_core.actors import Actor
from agent_core.gate import Verdict
from agent_core.models import Thread, ToolCall
from agent_core.tools import ToolSpec

from . import cases, escalation, guards, quorum
from . import sql as statements
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
        expires_at = timezone.now() + requirement.ttl if requirement.ttl else None
        if requirement.escalate is not None and expires_at is not None:
            escalation.stamp(call, requirement.escalate, expires_at)
        if requirement.quorum > 1:
            # A standing yes is one person's: it never stands in for several.
            quorum.stamp(call, requirement)
        elif tool.rememberable:
            grant = rows.fetch_one(
                statements.REMEMBERED_GRANT, [thread.pk, tool.name, timezone.now()]
            )
            if grant is not None:
                return Verdict(required=True, approver=approver, remembered_by_ref=grant[0])
        return Verdict(required=True, approver=approver, expires_at=expires_at)

    def requested(self, calls: Sequence[ToolCall]) -> None:
        """Record the notifications of ``calls`` with their request (``notify.delivery``)."""
        delivery.record(calls)

    def decidable(self, actor: Actor) -> Q:
        """What the policy lets ``actor`` decide now, and the calls escalated to its roles with
        the power to decide (decided or not: it may follow what it decided)."""
        return get_policy().decidable(actor) | cases.escalated(actor)
