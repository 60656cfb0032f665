"""The demo agents, registered in ``AGENT["AGENTS"]``: ``support`` (``demo.agents.support_agent``)
hands refunds to ``billing`` (``ask_billing``) and has a campaign reviewed by ``legal`` and
``brand`` in parallel (``ask_campaign_review``) before it sends it."""

from __future__ import annotations

from agent_core.agents import Agent
from agent_core.compositions import Parallel
from agent_core.providers.base import ModelRequest
from agent_core.providers.scripted import Reply, register_script

from .tools import (
    ask_user,
    issue_refund,
    lookup_order,
    purge_cache,
    schedule_follow_up,
    send_campaign,
    sign_off,
)

support_agent = Agent(
    name="support",
    instructions=(
        "You are the support desk of a small shop. Look orders up before acting. Refunds, "
        "campaigns, cache purges and stock reservations need a person's approval; ask the user "
        "when a detail is missing. A follow-up email is a proposal: say you proposed it; "
        "someone decides later."
    ),
    # "mcp:warehouse": every tool of the demo's MCP server (demo/mcp_server.py), as
    # mcp__warehouse__check_stock (read) and mcp__warehouse__reserve_stock (an action).
    tools=(
        lookup_order,
        issue_refund,
        send_campaign,
        purge_cache,
        ask_user,
        schedule_follow_up,
        "mcp:warehouse",
    ),
    delegates=("billing", "campaign_review"),
    text_decisions=True,  # "yes", "no", "approve always #id" in the chat decide (SPEC §17)
)

billing_agent = Agent(
    name="billing",
    description="The billing desk: looks orders up and refunds them (finance approves refunds).",
    instructions="You handle refunds. Look the order up, refund what is asked, say what you did.",
    tools=(lookup_order, issue_refund),
)


def review_script(request: ModelRequest) -> Reply:
    """A reviewer: asked with a campaign id, it signs it off (a person of its team approves);
    then it says whether it did."""
    last = request.messages[-1]
    if last.role == "user":
        campaign = "".join(p.get("text", "") for p in last.parts).strip()
        return Reply(calls=[("sign_off", {"campaign_id": campaign})])
    [result] = [p for p in last.parts if p.get("type") == "tool_result"]
    return Reply(text="signed off" if not result.get("is_error") else "not signed off")


register_script("review", review_script)

legal_agent = Agent(
    name="legal",
    instructions="Review campaigns for legal.",
    model="scripted:review",
    tools=(sign_off,),
)
brand_agent = Agent(
    name="brand",
    instructions="Review campaigns for brand.",
    model="scripted:review",
    tools=(sign_off,),
)


def merge_reviews(answers: dict[str, str]) -> str:
    """The campaign may go out once every reviewer signed it off."""
    held = [team for team, answer in answers.items() if answer != "signed off"]
    if held:
        return f"Hold the campaign: {', '.join(held)} did not sign it off."
    return "Legal and brand signed it off: it may be sent."


campaign_review = Parallel(
    name="campaign_review",
    description="Legal and brand review a campaign (its id) in parallel; answers whether it "
    "may be sent.",
    branches=("legal", "brand"),
    merge=merge_reviews,
)
