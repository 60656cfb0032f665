"""A test approval policy: refunds wait on the ``finance`` role for 30 minutes."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from agent_core.actors import Actor
from agent_core.models import Thread
from agent_core.tools import ToolSpec
from approvals.policy import ApprovalPolicy, Requirement


class FinancePolicy(ApprovalPolicy):
    """``issue_refund`` needs finance; every other action call needs the requester."""

    def requirement_for(
        self, tool: ToolSpec, args: dict[str, Any], actor: Actor, thread: Thread
    ) -> Requirement:
        if tool.name == "issue_refund":
            return Requirement(approver="finance", ttl=timedelta(minutes=30))
        return Requirement()
