"""Test-only tools that lose their database connection in the middle of their work, once per
call, the way a PostgreSQL restart ends every session: the server ends the backend
(``pg_terminate_backend``), and the next statement on that connection raises."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.db import connection, connections

from agent_core.agents import Agent
from agent_core.tools import ToolContext, tool
from demo.models import MailerSend, Order, Refund

_cut: set[str] = set()


def _cut_once(call_id: str) -> None:
    """End this connection's session from another one, on the call's first attempt only."""
    if call_id in _cut:
        return
    _cut.add(call_id)
    pid = connection.connection.info.backend_pid
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%(pid)s)", {"pid": pid})
    finally:
        other.close()


@tool(kind="action", atomic=True)
def refund_through_restart(ctx: ToolContext, order_id: str, amount: str) -> dict[str, Any]:
    """Refund an order; the database restarts before the refund commits (first attempt)."""
    refund = Refund.objects.create(
        order_id=order_id, amount=Decimal(amount), tool_call_id=ctx.tool_call_id
    )
    _cut_once(ctx.tool_call_id)
    Order.objects.filter(pk=order_id).exists()  # the restart shows here
    return {"refund_id": refund.pk}


@tool(kind="action")
def mail_through_restart(ctx: ToolContext, campaign_id: str) -> dict[str, Any]:
    """Send a mail; the database restarts after it went out, before its call is recorded."""
    sent = MailerSend.objects.create(
        campaign_id=campaign_id, idempotency_key=ctx.idempotency_key, recipients=1
    )
    _cut_once(ctx.tool_call_id)
    return {"send_id": sent.pk}


outage_agent = Agent(
    name="outage", instructions="Fault tests.", tools=(refund_through_restart, mail_through_restart)
)
