"""Every raw SQL statement of the approvals app, named and kept together (PostgreSQL only).

The pending inbox is read by the REST API and the console on every visit, and every decision reads
its call's quorum and appends an audit row; compiled by the ORM (and built as model instances)
these cost several times what running them does. ``%s``
placeholders, in the order documented above each statement.
"""

from __future__ import annotations

from agent_core import sql
from agent_core.models import Run, ToolCall

from .models import Approval, DecisionAttempt, Escalation, Quorum

_CALL = ToolCall._meta.db_table

# The rows of one page of pending calls (pending.rows): ``{keys}`` is the SQL of the page's
# ``(id, sort key)`` pairs (the ORM compiles it from the filters, the cursor and the policy's
# ``decidable``), ``{order}`` the page's order. Only those rows are joined to their run and read,
# with their quorum, the approvals given since they last started waiting (only for calls that
# need several) and the role they were escalated to. Parameters: those of ``{keys}``.
PENDING_ROWS = (
    "SELECT c.id, c.status, c.tool_name, c.kind, c.args, c.confirmation, c.summary, c.approver,"
    " c.requester_ref, c.thread_id, c.run_id, r.agent, r.parent_run_id, c.requested_at,"
    " c.expires_at, COALESCE(q.needed, 1),"
    " CASE WHEN q.needed > 1 THEN ARRAY("
    f"  SELECT a.by_ref FROM {Approval._meta.db_table} a"
    "   WHERE a.tool_call_id = c.id AND a.at >= c.requested_at ORDER BY a.at, a.id) END,"
    " CASE WHEN q.needed > 1 THEN ARRAY("
    f"  SELECT a.at FROM {Approval._meta.db_table} a"
    "   WHERE a.tool_call_id = c.id AND a.at >= c.requested_at ORDER BY a.at, a.id) END,"
    f" (SELECT e.role FROM {Escalation._meta.db_table} e"
    "   WHERE e.tool_call_id = c.id AND e.escalated_at IS NOT NULL)"
    f" FROM ({{keys}}) AS page JOIN {_CALL} c ON c.id = page.id"
    f" JOIN {Run._meta.db_table} r ON r.id = c.run_id"
    f" LEFT JOIN {Quorum._meta.db_table} q ON q.tool_call_id = c.id"
    " ORDER BY {order}"
)

# The decision path (the approval port).
# A call and its run locked and read, with the call's quorum (attempts.attempt, quorum.vote),
# as ``sql.LOCK_CALL``: call id. The quorum's columns are NULL for a call without one. A quorum is
# written with its call and never changes, so the row the statement's snapshot saw is current.
LOCK_CALL_WITH_QUORUM = sql.lock_call(
    ", q.needed, q.requester_counts",
    f" LEFT JOIN {Quorum._meta.db_table} q ON q.tool_call_id = c.id",
)

# Append a decision attempt (attempts.audit): call id, run id, thread id, tool name, action,
# actor ref, via, outcome, detail, created at.
AUDIT_ATTEMPT = (
    f"INSERT INTO {DecisionAttempt._meta.db_table} (tool_call_id, run_id, thread_id, tool_name,"
    " action, actor_ref, via, outcome, detail, created_at)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)

# A decision's compare-and-set and frames with the attempt's audit row, in one round trip
# (services: an approval or rejection that settles the call): as ``sql.SETTLE_CALL``, the audit
# row's parameters (as AUDIT_ATTEMPT's) where ``also``'s go. The row is appended whatever the
# compare-and-set found, as ``attempts.attempt`` would.
SETTLE_AUDITED = sql.settle_call(f"a AS ({AUDIT_ATTEMPT}),")
