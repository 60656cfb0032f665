"""Approval policy: per call, who must say yes and for how long; who may decide.

``AGENT["APPROVAL_POLICY"]`` names the class. Its answer is taken once, inside the suspend
transaction, and stored on the call (``requires_approval``, ``approver``, ``expires_at``):
changing the policy while a run waits does not re-decide it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Q
from django.utils.module_loading import import_string

from agent_core.actors import Actor
from agent_core.choices import CallStatus
from agent_core.conf import agent_settings
from agent_core.models import Thread, ToolCall
from agent_core.tools import ToolSpec

from . import cases
from .conf import approvals_settings
from .models import Escalation
from .pending import WAITING
from .requirement import REQUESTER, Escalate, Requirement, approver_roles
from .rules import requirement_from_rules, rules_for

__all__ = [
    "REQUESTER",
    "ApprovalPolicy",
    "DefaultPolicy",
    "Escalate",
    "Requirement",
    "get_policy",
]


class ApprovalPolicy:
    """The base policy: every action call needs the requester's yes, with no expiry.

    Subclass and override ``requirement_for`` (who and how long), ``can_decide`` / ``can_answer``
    (who may decide a stored call). Whoever overrides ``can_decide`` or ``can_answer`` also
    overrides ``decidable``, the same rule as a filter, which every list of what an actor may
    decide or see uses (the inbox, the console, the runs an approver follows): its mirror in SQL,
    or, for a rule SQL cannot say, ``checked_one_by_one`` (the system check ``approvals.W001``
    reminds you). ``docs/howto/approval-policy.md`` says both paths.
    """

    def requirement_for(
        self, tool: ToolSpec, args: dict[str, Any], actor: Actor, thread: Thread
    ) -> Requirement:
        """Whether ``tool`` called with ``args`` by ``actor`` on ``thread`` needs a yes."""
        return Requirement()

    def standing_requirement(self, tool: ToolSpec) -> Requirement | None:
        """``requirement_for`` of every call of ``tool`` when it depends on none of the call's
        args, actor or thread (``None``: it does, or this policy cannot tell): what
        ``GET /agent/tools`` shows. A policy overriding ``requirement_for`` says ``None`` unless
        it overrides this too."""
        if type(self).requirement_for is not ApprovalPolicy.requirement_for:
            return None
        return Requirement()

    def can_decide(self, actor: Actor, call: ToolCall) -> bool:
        """Requester approvals belong to the thread's owner; role approvals to the role holders.

        A call that needed nobody's yes (no approver) is its requester's to decide should it go
        in doubt: someone must be able to mark it done or not done. A call escalated to a role
        with ``may_decide`` is that role's to decide too.
        """
        if call.approver in (REQUESTER, ""):
            allowed = actor.ref == call.requester_ref
        else:
            allowed = bool(actor.roles & approver_roles(call.approver))
        # Only a call with a deadline can have been escalated (an escalation needs a ttl).
        escalable = call.expires_at is not None and bool(actor.roles)
        return allowed or (escalable and _escalated_to(actor, call))

    def recipients(self, call: ToolCall) -> list[str]:
        """Who is told that ``call`` waits: its requester, or the active users holding one of
        its approver roles (Django groups), as actor refs."""
        if call.approver in (REQUESTER, ""):
            return [call.requester_ref] if call.requester_ref else []
        return role_members(approver_roles(call.approver))

    def max_extension(
        self, tool: ToolSpec, call: ToolCall, *, ttl: timedelta | None
    ) -> timedelta | None:
        """How far past now a decider may move ``call``'s deadline: ``APPROVALS["MAX_EXTENSION"]``
        for the tool, else ``ttl`` (what ``requirement_for`` gives the call); ``None``: the
        call's own window (deadline minus request time)."""
        return approvals_settings().max_extension(tool.name) or ttl

    def can_answer(self, actor: Actor, call: ToolCall) -> bool:
        """A human tool's question is answered by the thread's owner."""
        return actor.ref == call.requester_ref

    def may_run(self, actor: Actor, call: ToolCall, tool: ToolSpec) -> bool:
        """Asked again right before an approved independent proposal executes, with its
        requester as they are now: whether the call may still run (SPEC §17)."""
        return True

    def may_remember(self, tool: ToolSpec, call: ToolCall) -> bool:
        """Whether "approve and remember" is offered (and accepted) for ``call``."""
        return tool.rememberable

    def decidable(self, actor: Actor) -> Q:
        """``can_decide`` and ``can_answer`` as a filter on pending ``ToolCall`` rows: the cases
        of ``cases.decidable``, which the inbox's named counts and first pages say too."""
        return cases.decidable(actor)

    def checked_one_by_one(self, actor: Actor) -> Q:
        """``decidable`` for a rule SQL cannot say: ``can_decide`` / ``can_answer`` asked of
        every waiting call, its answer the filter of the calls that said yes. One query and a
        call of the rule per waiting call: for as many waiting calls as a request can afford."""
        waiting = ToolCall.objects.filter(status__in=WAITING).select_related("run", "thread")
        allowed = [
            call.pk
            for call in waiting
            if (self.can_answer if call.status == CallStatus.PENDING_INPUT else self.can_decide)(
                actor, call
            )
        ]
        return Q(pk__in=allowed)


def role_members(roles: frozenset[str]) -> list[str]:
    """The active users holding any of ``roles`` (Django groups), as actor refs."""
    members = get_user_model().objects.filter(groups__name__in=roles, is_active=True)
    return [f"user:{pk}" for pk in members.distinct().order_by("pk").values_list("pk", flat=True)]


def _escalated_to(actor: Actor, call: ToolCall) -> bool:
    """Whether ``call`` was escalated to one of ``actor``'s roles, with the power to decide."""
    return Escalation.objects.filter(
        tool_call_id=call.pk, role__in=actor.roles, may_decide=True, escalated_at__isnull=False
    ).exists()


class RulesPolicy(ApprovalPolicy):
    """The base policy, refined per tool by the declarative ``APPROVALS["RULES"]`` setting."""

    def requirement_for(
        self, tool: ToolSpec, args: dict[str, Any], actor: Actor, thread: Thread
    ) -> Requirement:
        found = requirement_from_rules(tool.name, args)
        if found is not None:
            return found
        return super().requirement_for(tool, args, actor, thread)

    def standing_requirement(self, tool: ToolSpec) -> Requirement | None:
        if type(self).requirement_for is not RulesPolicy.requirement_for:
            return None
        rules = rules_for(tool.name)
        if not rules:
            return Requirement()
        # Only a first rule without conditions holds whatever the args say.
        return None if rules[0].when else rules[0].requirement


class DefaultPolicy(RulesPolicy):
    """Every action call requires the requester, no expiry (SPEC §7), unless a rule says else."""


def policy_path() -> str:
    """The dotted path of the configured policy: ``AGENT["APPROVAL_POLICY"]``, else the default."""
    return agent_settings().APPROVAL_POLICY or "approvals.policy.DefaultPolicy"


def get_policy() -> ApprovalPolicy:
    """The configured approval policy."""
    policy: ApprovalPolicy = import_string(policy_path())()
    return policy
