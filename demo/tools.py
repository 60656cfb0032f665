"""The demo agent's tools: one of each kind the product cares about."""

from __future__ import annotations

import datetime
import os
import time
from decimal import Decimal
from typing import Annotated, Any

import pydantic
from django.utils import timezone
from pydantic import Field

from agent_core.engine.rows import fetch_one
from agent_core.tools import Confirm, Preflight, Recovered, ToolContext, human_tool, tool

from . import mailer, sql
from .models import CachePurge, Campaign, FollowUp, Order


@tool(kind="read")
def lookup_order(ctx: ToolContext, order_id: str) -> dict[str, Any]:
    """Look up an order by id: customer, total, status and refunds so far."""
    order = fetch_one(sql.ORDER_WITH_REFUNDS, [order_id])
    if order is None:
        return {"order_id": order_id, "found": False}
    pk, email, total, status, name, refunded = order
    return {
        "order_id": pk,
        "found": True,
        "customer_email": email,
        "customer_name": name or "",
        "total": str(total),
        "status": status,
        "refunded": str(refunded or Decimal(0)),
    }


def _refund_summary(ctx: ToolContext, args: dict[str, Any]) -> str:
    order = fetch_one(sql.ORDER, [args["order_id"]])
    said = f"Refund {Decimal(args['amount']):.2f} on order {args['order_id']}"
    if order is None:
        return f"{said} (no such order)"
    _, email, total, _, name = order
    return f"{said} — {name if name is not None else email}, order total {total}"


def _refund_within_total(
    ctx: ToolContext, original: dict[str, Any], edited: dict[str, Any]
) -> None:
    # An approver may lower or raise a refund, never past what the customer paid.
    total = Order.objects.filter(pk=edited["order_id"]).values_list("total", flat=True).first()
    if total is not None and Decimal(edited["amount"]) > total:
        raise ValueError(f"a refund of {edited['amount']} exceeds the order's total of {total}")


@tool(
    kind="action",
    atomic=True,
    summary=_refund_summary,
    editable=("amount", "reason"),
    validate_edit=_refund_within_total,
    confirm="token",
    amount=lambda args: Decimal(args["amount"]),
    related_by=("order_id",),
)
def issue_refund(
    ctx: ToolContext,
    order_id: str,
    amount: Annotated[Decimal, Field(gt=0, max_digits=10, decimal_places=2)],
    reason: str = "",
) -> dict[str, Any]:
    """Refund part or all of an order to the customer's original payment method."""
    _pause("DEMO_REFUND_DELAY")
    now = timezone.now()
    refund = fetch_one(sql.ISSUE_REFUND, [amount, reason, ctx.tool_call_id, now, order_id])
    if refund is None:
        raise Order.DoesNotExist(f"No order {order_id}.")
    return {"refund_id": refund[0], "order_id": order_id, "amount": str(refund[1])}


def _campaign_preflight(ctx: ToolContext, args: dict[str, Any]) -> Preflight:
    campaign = Campaign.objects.filter(pk=args["campaign_id"]).first()
    if campaign is None:
        return None
    return Confirm(f"Email “{campaign.subject}” to {campaign.audience_size:,} people.")


def _campaign_summary(ctx: ToolContext, args: dict[str, Any]) -> str:
    campaign = Campaign.objects.filter(pk=args["campaign_id"]).first()
    if campaign is None:
        return f"Send campaign {args['campaign_id']} (no such campaign)"
    return f"Send “{campaign.subject}” to {campaign.audience_size:,} people"


def _campaign_recover(ctx: ToolContext, args: dict[str, Any]) -> Recovered:
    sent = mailer.find(ctx.idempotency_key)
    if sent is None:
        return Recovered(done=False)
    return Recovered(done=True, result={"send_id": sent.pk, "recipients": sent.recipients})


@tool(
    kind="action",
    preflight=_campaign_preflight,
    recover=_campaign_recover,
    summary=_campaign_summary,
    rememberable=False,
)
def send_campaign(ctx: ToolContext, campaign_id: str) -> dict[str, Any]:
    """Email a marketing campaign to its whole audience."""
    campaign = Campaign.objects.get(pk=campaign_id)
    sent = mailer.send(campaign.pk, campaign.audience_size, idempotency_key=ctx.idempotency_key)
    return {"send_id": sent.pk, "recipients": sent.recipients}


@tool(kind="action", summary=lambda ctx, args: f"Purge {args['path']} from the CDN cache")
def purge_cache(ctx: ToolContext, path: str) -> dict[str, Any]:
    """Purge a path from the CDN cache (the next visitors hit the origin)."""
    purge = CachePurge.objects.create(path=path, tool_call_id=ctx.tool_call_id)
    _pause("DEMO_PURGE_DELAY")
    return {"purged": path, "purge_id": purge.pk}


@tool(kind="action")
def sign_off(ctx: ToolContext, campaign_id: str) -> dict[str, Any]:
    """Sign a campaign off for this reviewer's team (a person of the team approves it)."""
    return {"campaign_id": campaign_id, "signed_off": True}


class Answer(pydantic.BaseModel):
    """The user's reply to a question."""

    answer: str = Field(min_length=1, description="Your answer")


ask_user = human_tool(
    "ask_user",
    description="Ask the user for a missing detail; their answer is the result.",
    answer=Answer,
)


@tool(
    kind="action",
    atomic=True,
    approval_mode="independent",
    replacement_key=lambda args: str(args["order_id"]),
    confirmation="Email the customer of order {order_id} a follow-up on {send_on}",
)
def schedule_follow_up(
    ctx: ToolContext, order_id: str, send_on: datetime.date, note: str = ""
) -> dict[str, Any]:
    """Propose a follow-up email to an order's customer on a date. A person decides later; the
    conversation goes on meanwhile. A newer proposal for the same order replaces a pending one."""
    _pause("DEMO_FOLLOW_UP_DELAY")
    order = Order.objects.filter(pk=order_id).first()
    if order is None:
        raise Order.DoesNotExist(f"No order {order_id}.")
    follow_up = FollowUp.objects.create(
        order=order, send_on=send_on, note=note, tool_call_id=ctx.tool_call_id
    )
    return {"follow_up_id": follow_up.pk, "order_id": order_id, "send_on": str(send_on)}


def _pause(variable: str) -> None:
    # Lets crash tests stop a worker at a chosen moment in a tool.
    time.sleep(float(os.environ.get(variable, "0")))
