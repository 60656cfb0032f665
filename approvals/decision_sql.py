"""The decision path's raw SQL statements (the approval port), named and kept together.

Every decision reads its call's quorum and appends an audit row; compiled by the ORM (and the row
built as a model, saved with its signals) these cost several times what running them does.
``%s`` placeholders, in the order documented above each statement.
"""

from __future__ import annotations

from .models import DecisionAttempt, Quorum

# A call's quorum, if it has one (quorum.vote): call id.
QUORUM_OF_CALL = (
    f"SELECT needed, requester_counts FROM {Quorum._meta.db_table} WHERE tool_call_id = %s"
)

# Append a decision attempt (attempts.audit): call id, run id, thread id, tool name, action,
# actor ref, via, outcome, detail, created at.
AUDIT_ATTEMPT = (
    f"INSERT INTO {DecisionAttempt._meta.db_table} (tool_call_id, run_id, thread_id, tool_name,"
    " action, actor_ref, via, outcome, detail, created_at)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
