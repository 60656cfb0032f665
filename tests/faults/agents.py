"""Test-only tools of the fault tests (the ``outage`` agent).

``refund_through_restart`` and ``mail_through_restart`` lose their database connection in the
middle of their work, once per call, the way a PostgreSQL restart ends every session: the server
ends the backend (``pg_terminate_backend``), and the next statement on that connection raises.
``mail_slowly`` sends through the demo mailer, which confirms the send only after
``AIRLOCK_TEST_MAILER_CONFIRM`` seconds (its commit): a worker frozen in between has an effect
in flight that ``recover`` cannot see yet."""

from __future__ import annotations

import os
import time
from decimal import Decimal
from typing import Any

from django.db import connection, connections, transaction

from agent_core.agents import Agent
from agent_core.tools import Recovered, ToolContext, tool
from demo import mailer
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
    return {"refund_id": refund.pk, "lease_token": ctx.lease_token}


@tool(kind="action")
def mail_through_restart(ctx: ToolContext, campaign_id: str) -> dict[str, Any]:
    """Send a mail; the database restarts after it went out, before its call is recorded."""
    sent = MailerSend.objects.create(
        campaign_id=campaign_id, idempotency_key=ctx.idempotency_key, recipients=1
    )
    _cut_once(ctx.tool_call_id)
    return {"send_id": sent.pk}


def _mailed(ctx: ToolContext, args: dict[str, Any]) -> Recovered:
    sent = mailer.find(ctx.idempotency_key)
    return Recovered(done=sent is not None, result={"send_id": sent.pk} if sent else None)


@tool(kind="action", recover=_mailed)
def mail_slowly(ctx: ToolContext, campaign_id: str) -> dict[str, Any]:
    """Send a mail through a provider that confirms it slowly."""
    with transaction.atomic():  # the provider's own transaction: the send is out at its commit
        sent = mailer.send(campaign_id, 1, idempotency_key=ctx.idempotency_key)
        time.sleep(float(os.environ.get("AIRLOCK_TEST_MAILER_CONFIRM", "0")))
    return {"send_id": sent.pk}


outage_agent = Agent(
    name="outage",
    instructions="Fault tests.",
    tools=(refund_through_restart, mail_through_restart, mail_slowly),
)
