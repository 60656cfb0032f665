"""The demo's approval policy: one rule per tool, showing the range of what a policy can say.

Set as ``AGENT["APPROVAL_POLICY"] = "demo.policy.DemoPolicy"`` in ``config/settings/dev.py``.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from agent_core.actors import Actor
from agent_core.models import Thread, ToolCall
from agent_core.tools import ToolSpec
from approvals.policy import REQUESTER, ApprovalPolicy, Requirement

SMALL_REFUND = Decimal("20")  # refunds below this need nobody's yes
REFUND_TTL = timedelta(minutes=15)
MOVES_MONEY = frozenset({"issue_refund"})


class DemoPolicy(ApprovalPolicy):
    """Refunds: finance, 15 minutes (small ones free); campaigns: two people from marketing, and
    each review's sign-off one of them; purges: the requester. Money moves only with a yes each
    time: refunds are never remembered."""

    def requirement_for(
        self, tool: ToolSpec, args: dict[str, Any], actor: Actor, thread: Thread
    ) -> Requirement:
        match tool.name:
            case "issue_refund":
                if _amount(args) < SMALL_REFUND:
                    return Requirement(required=False)
                return Requirement(approver="finance", ttl=REFUND_TTL)
            case "send_campaign":
                return Requirement(approver="marketing", quorum=2)  # the two-person rule
            case "sign_off":  # a campaign review's sign-off (demo.agents.campaign_review)
                return Requirement(approver="marketing")
            case "purge_cache":
                return Requirement(approver=REQUESTER)
        return Requirement()

    def may_remember(self, tool: ToolSpec, call: ToolCall) -> bool:
        return tool.name not in MOVES_MONEY and super().may_remember(tool, call)


def _amount(args: dict[str, Any]) -> Decimal:
    try:
        return Decimal(str(args.get("amount")))
    except InvalidOperation:
        return SMALL_REFUND  # not a number: validation has refused it already; ask anyway
