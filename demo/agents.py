"""The demo agents, registered in ``AGENT["AGENTS"]``: ``support`` (``demo.agents.support_agent``)
hands refunds to ``billing`` (``demo.agents.billing_agent``) with ``ask_billing``."""

from __future__ import annotations

from agent_core.agents import Agent

from .tools import ask_user, issue_refund, lookup_order, purge_cache, send_campaign

support_agent = Agent(
    name="support",
    instructions=(
        "You are the support desk of a small shop. Look orders up before acting. Refunds, "
        "campaigns and cache purges need a person's approval; ask the user when a detail is "
        "missing."
    ),
    tools=(lookup_order, issue_refund, send_campaign, purge_cache, ask_user),
    delegates=("billing",),
)

billing_agent = Agent(
    name="billing",
    description="The billing desk: looks orders up and refunds them (finance approves refunds).",
    instructions="You handle refunds. Look the order up, refund what is asked, say what you did.",
    tools=(lookup_order, issue_refund),
)
