"""The demo shop's tools read an order, its customer and its refunds in one query."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agent_core.actors import SYSTEM
from agent_core.tools import ToolContext
from demo.models import Customer, Order, Refund
from demo.tools import issue_refund, lookup_order

CTX = ToolContext(run_id="r", thread_id="t", tool_call_id="tc", actor=SYSTEM, idempotency_key="k")


@pytest.mark.django_db
def test_lookup_order_reads_the_customer_and_the_refunds_in_one_query(shop):
    Customer.objects.create(email="maria@example.com", name="Maria")
    order = Order.objects.get(pk="A-1001")
    Refund.objects.create(order=order, amount=Decimal("5.00"), tool_call_id="tc_1")
    Refund.objects.create(order=order, amount=Decimal("2.50"), tool_call_id="tc_2")
    with CaptureQueriesContext(connection) as queries:
        found = lookup_order(CTX, {"order_id": "A-1001"})
    assert len(queries) == 1
    assert found == {
        "order_id": "A-1001",
        "found": True,
        "customer_email": "maria@example.com",
        "customer_name": "Maria",
        "total": "59.90",
        "status": "delivered",
        "refunded": "7.50",
    }
    li = lookup_order(CTX, {"order_id": "A-1002"})
    assert (li["customer_name"], li["refunded"]) == ("", "0")
    assert lookup_order(CTX, {"order_id": "NOPE"}) == {"order_id": "NOPE", "found": False}


@pytest.mark.django_db
def test_a_refunds_summary_names_the_customer_or_their_address(shop):
    Customer.objects.create(email="li@example.com", name="Li")
    args = {"order_id": "A-1002", "amount": "3"}
    with CaptureQueriesContext(connection) as queries:
        said = issue_refund.summarize(CTX, args)
    assert len(queries) == 1
    assert said == "Refund 3.00 on order A-1002 — Li, order total 12.50"
    maria = issue_refund.summarize(CTX, {**args, "order_id": "A-1001"})
    assert maria == "Refund 3.00 on order A-1001 — maria@example.com, order total 59.90"


@pytest.mark.django_db
def test_a_refund_is_one_statement_and_refuses_an_order_that_does_not_exist(shop):
    with CaptureQueriesContext(connection) as queries:
        done = issue_refund(CTX, {"order_id": "A-1001", "amount": "2.5", "reason": "late"})
    assert len(queries) == 1
    refund = Refund.objects.get()
    assert done == {"refund_id": refund.pk, "order_id": "A-1001", "amount": "2.50"}
    assert (refund.amount, refund.reason, refund.tool_call_id) == (Decimal("2.50"), "late", "tc")
    with pytest.raises(Order.DoesNotExist):
        issue_refund(CTX, {"order_id": "NOPE", "amount": "1"})
    assert Refund.objects.count() == 1
