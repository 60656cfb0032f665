"""Every raw SQL statement of the core, named and kept together (PostgreSQL only, SPEC §2).

The hot path uses these where the ORM cannot say it in one statement (``RETURNING``, ``ON
CONFLICT``, a row and its journal in one read) or where compiling the query costs more than
running it. Everything else goes through the ORM. ``%s`` placeholders, in the order documented
above each statement.
"""

from __future__ import annotations

import functools
from typing import Any

from django.db import connection
from django.db.models import Model

from .models import Message, Run, Step, StreamFrame, ToolCall

_RUN = Run._meta.db_table
_STEP = Step._meta.db_table
_CALL = ToolCall._meta.db_table

# Take a run's lease (leases.acquire): status, owner, deadline, run id, the two statuses a run
# may be taken in, now, the token passed on. Waits for the row lock, then re-checks the row.
ACQUIRE_LEASE = (
    f"UPDATE {_RUN} SET status = %s, lease_owner = %s,"
    " lease_token = lease_token + 1, lease_expires_at = %s"
    " WHERE id = %s AND status IN (%s, %s)"
    " AND (lease_owner = '' OR lease_expires_at < %s OR lease_token = %s)"
    " RETURNING lease_token"
)

# The conditions of a write fenced by a lease: token, owner.
FENCED = "AND lease_token = %s AND lease_owner = %s"


# A model's columns in its field order (``fetch_models`` reads them as the ORM would), under an
# alias.
def _columns(model: type[Model], alias: str) -> str:
    return ", ".join(f"{alias}.{field.column}" for field in model._meta.concrete_fields)


# A run's row, locked, while a lease holds it (leases.lock): run id, token, owner.
LOCK_RUN = f"SELECT * FROM {_RUN} WHERE id = %s {FENCED} FOR UPDATE"

# A run and its journal (``name status`` pairs) in one read (journal.read_run): run id.
READ_RUN = (
    f"SELECT *, ARRAY(SELECT s.name || ' ' || s.status FROM {_STEP} s"
    f" WHERE s.run_id = r.id) AS journal FROM {_RUN} r WHERE r.id = %s"
)
# The same, locked, while a lease holds it: run id, token, owner.
READ_RUN_LOCKED = f"{READ_RUN} {FENCED} FOR UPDATE OF r"

# Every call of a run in the order its steps proposed them (journal.run_calls), each with
# ``delegated``: whether it started a child run (SPEC §14): run id.
RUN_CALLS = (
    f"SELECT c.*, EXISTS (SELECT 1 FROM {_RUN} k WHERE k.parent_tool_call_id = c.id) AS delegated"
    f" FROM {ToolCall._meta.db_table} c WHERE c.run_id = %s ORDER BY c.position"
)

# A run and its ancestors, nearest first, as ``(id, agent, parent_tool_call_id)`` (delegation's
# depth and cycle checks, the chain an inbox card names): run id.
ANCESTRY = (
    f"WITH RECURSIVE up(id, agent, parent_run_id, parent_tool_call_id, depth) AS ("
    f" SELECT id, agent, parent_run_id, parent_tool_call_id, 0 FROM {_RUN} WHERE id = %s"
    f" UNION ALL SELECT r.id, r.agent, r.parent_run_id, r.parent_tool_call_id, up.depth + 1"
    f" FROM {_RUN} r JOIN up ON r.id = up.parent_run_id WHERE up.depth < 64)"
    " SELECT id, agent, parent_tool_call_id FROM up ORDER BY depth"
)

# Journal a model step's start, counting attempts (journal.begin_model_step): run id, name,
# status, started at.
BEGIN_STEP = (
    f"INSERT INTO {_STEP} AS s (run_id, name, status, attempts, started_at)"
    " VALUES (%s, %s, %s, 1, %s)"
    " ON CONFLICT (run_id, name) DO UPDATE SET attempts = s.attempts + 1 RETURNING s.attempts"
)

# Reserve frame numbers on the run row and insert the frames that take them (streams.emit), and
# say whose child the run is, if it waits on it (its frames go to that stream too): count, run
# id, run id, count, created at, kinds, JSON payloads.
_EMIT = (
    "WITH r AS (UPDATE {run} SET last_seq = last_seq + %s WHERE id = %s{only}"
    " RETURNING last_seq, parent_run_id, parent_tool_call_id),"
    " f AS (INSERT INTO {frame} (run_id, seq, kind, data, superseded, created_at)"
    " SELECT %s, r.last_seq - %s + f.n, f.kind, f.data::jsonb, false, %s"
    " FROM r, unnest(%s::varchar[], %s::text[]) WITH ORDINALITY AS f(kind, data, n)"
    " RETURNING seq)"
    " SELECT f.seq, r.parent_run_id, r.parent_tool_call_id FROM f, r"
)
EMIT_FRAMES = _EMIT.format(run=_RUN, frame=StreamFrame._meta.db_table, only="")
# The same into an ancestor's stream, unless it has ended (its ``finish`` is its last frame).
MIRROR_FRAMES = _EMIT.format(
    run=_RUN,
    frame=StreamFrame._meta.db_table,
    only=" AND status NOT IN ('completed', 'failed', 'cancelled')",
)

# The thread's next message number and the message that takes it (transcript.append): id,
# thread id, run id, role, JSON content, created at, thread id.
APPEND_MESSAGE = (
    f"INSERT INTO {Message._meta.db_table} (id, thread_id, run_id, seq, role, content, created_at)"
    " SELECT %s, %s, %s, COALESCE(MAX(seq), 0) + 1, %s, %s::jsonb, %s"
    f" FROM {Message._meta.db_table} WHERE thread_id = %s RETURNING seq"
)

# A lock held to commit, by name (quotas: an actor's starts; idempotency: one key): the name.
ADVISORY_LOCK = "SELECT pg_advisory_xact_lock(hashtext(%s))"
TRY_ADVISORY_LOCK = "SELECT pg_try_advisory_xact_lock(hashtext(%s))"


# ---- Decisions (agent_core.decisions, the approval port) and API token authentication ----

# Lock the run of a call, its row whole (decisions.decision): call id. The call itself is read by
# a second statement, after the lock: a row read with the lock in one statement would be the one
# the statement's snapshot saw, not what a writer committed while this one waited.
LOCK_RUN_OF_CALL = (
    f"SELECT {_columns(Run, 'r')} FROM {_RUN} r"
    f" WHERE r.id = (SELECT run_id FROM {_CALL} WHERE id = %s) FOR UPDATE"
)
# A call's row (decisions.decision, under its run's lock): call id.
READ_CALL = f"SELECT {_columns(ToolCall, 'c')} FROM {_CALL} c WHERE c.id = %s"

# A decision on a pending call, as one compare-and-set (decisions.Decision.settle): the new
# status, decided by, via, at, reason, remember, edited args as JSON (NULL: unchanged; the old
# ones are kept as ``original_args``) twice, their digest, finished at (NULL: unchanged), call id,
# the status it must still have, the statuses ``runs.open_calls`` asks about. Returns the
# statuses among those of the run's other calls (every writer of a call holds its run's lock,
# which the decision holds): no row, the call was no longer pending.
SETTLE_CALL = (
    f"UPDATE {_CALL} c SET status = %s, decided_by_ref = %s, decided_via = %s, decided_at = %s,"
    " reason = %s, remember = %s, args = COALESCE(%s::jsonb, c.args),"
    " original_args = CASE WHEN %s::jsonb IS NULL THEN c.original_args ELSE c.args END,"
    " args_digest = COALESCE(%s, c.args_digest), finished_at = COALESCE(%s, c.finished_at)"
    " WHERE c.id = %s AND c.status = %s"
    f" RETURNING ARRAY(SELECT DISTINCT o.status FROM {_CALL} o"
    " WHERE o.run_id = c.run_id AND o.id <> c.id AND o.status = ANY(%s))"
)

# A token's user, whole, and the names of the user's groups (its roles) in one read
# (api.auth.TokenAuthentication): token key. Formatted once per process with the tables and
# columns of the configured token and user models.
TOKEN_USER = (
    "SELECT {columns}, ARRAY(SELECT g.{group_name} FROM {user_groups} ug"
    " JOIN {group} g ON g.{group_pk} = ug.{group_fk} WHERE ug.{user_fk} = u.{user_pk})"
    " FROM {token} t JOIN {user} u ON u.{user_pk} = t.{token_user_fk} WHERE t.{token_key} = %s"
)


def fetch_one(statement: str, params: list[Any]) -> tuple[Any, ...] | None:
    """Run ``statement``; its first row (``None``: no row)."""
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        row: tuple[Any, ...] | None = cursor.fetchone()
        return row


def fetch_models(
    statement: str, params: list[Any], *models: type[Model]
) -> tuple[list[Model], tuple[Any, ...]] | None:
    """Run ``statement`` (the columns of each of ``models`` as ``_columns`` lists them, then
    others); its first row as instances of ``models``, made as the ORM would have read them, and
    the other columns (``None``: no row). Cheaper than ``Model.objects.raw``, which resolves the
    columns of every row it reads by name."""
    row = fetch_one(statement, params)
    if row is None:
        return None
    made: list[Model] = []
    start = 0
    for model in models:
        fields = model._meta.concrete_fields
        values = list(row[start : start + len(fields)])
        for index, convert in _converters(model):
            values[index] = convert(values[index], None, connection)
        made.append(model.from_db(connection.alias, [f.attname for f in fields], values))
        start += len(fields)
    return made, row[start:]


@functools.cache
def _converters(model: type[Model]) -> list[tuple[int, Any]]:
    """The fields whose database values need converting (JSON, read as text)."""
    return [
        (index, field.from_db_value)
        for index, field in enumerate(model._meta.concrete_fields)
        if hasattr(field, "from_db_value")
    ]


def fetch_all(statement: str, params: list[Any]) -> list[tuple[Any, ...]]:
    """Run ``statement``; every row."""
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return list(cursor.fetchall())
