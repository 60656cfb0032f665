"""The demo tools' raw SQL, named and kept together (PostgreSQL only).

The approval cycle's benchmark runs ``lookup_order``, the refund's summary and the refund once a
cycle each: compiled by the ORM (its subqueries above all) they cost ten times the Python that
running them does. ``%s`` placeholders, in the order documented above each statement.
"""

from __future__ import annotations

from .models import Customer, Order, Refund

_ORDER = (
    "SELECT o.id, o.customer_email, o.total, o.status,"
    f" (SELECT c.name FROM {Customer._meta.db_table} c WHERE c.email = o.customer_email)"
)

# An order with its customer's name (NULL: no such customer): order id.
ORDER = f"{_ORDER} FROM {Order._meta.db_table} o WHERE o.id = %s"

# The same, with the sum of its refunds (NULL: none): order id.
ORDER_WITH_REFUNDS = (
    f"{_ORDER}, (SELECT SUM(r.amount) FROM {Refund._meta.db_table} r WHERE r.order_id = o.id)"
    f" FROM {Order._meta.db_table} o WHERE o.id = %s"
)

# A refund of an existing order (no row: no such order), its id and amount as stored: amount,
# reason, tool call id, created at, order id.
ISSUE_REFUND = (
    f"INSERT INTO {Refund._meta.db_table} (order_id, amount, reason, tool_call_id, created_at)"
    f" SELECT o.id, %s, %s, %s, %s FROM {Order._meta.db_table} o WHERE o.id = %s"
    " RETURNING id, amount"
)
