"""Approval policy: per call, who must say yes and for how long; who may decide.

``AGENT["APPROVAL_POLICY"]`` names the class. Its answer is taken once, inside the suspend
transaction, and stored on the call: changing the policy while a run waits does not re-decide it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.utils.module_loading import import_string

from agent_core.actors import Actor
from agent_core.conf import agent_settings
from agent_core.models import Thread, ToolCall
from agent_core.tools import ToolSpec

REQUESTER = "requester"


@dataclass(frozen=True)
class Requirement:
    """``required``: ask a person first; ``approver``: ``"requester"`` or a role name."""

    required: bool = True
    approver: str = REQUESTER
    ttl: timedelta | None = None


class ApprovalPolicy:
    """The base policy: every action call needs the requester's yes, with no expiry."""

    def requirement_for(
        self, tool: ToolSpec, args: dict[str, Any], actor: Actor, thread: Thread
    ) -> Requirement:
        return Requirement()

    def can_decide(self, actor: Actor, call: ToolCall) -> bool:
        """Requester approvals belong to the thread's owner; role approvals to the role holders."""
        if call.approver == REQUESTER:
            return actor.ref == call.requester_ref
        return actor.has_role(call.approver)

    def can_answer(self, actor: Actor, call: ToolCall) -> bool:
        """A human tool's question is answered by the thread's owner."""
        return actor.ref == call.requester_ref


class DefaultPolicy(ApprovalPolicy):
    """Every action call requires the requester; no expiry (SPEC §7)."""


def get_policy() -> ApprovalPolicy:
    """The configured approval policy."""
    policy: ApprovalPolicy = import_string(agent_settings().APPROVAL_POLICY)()
    return policy
