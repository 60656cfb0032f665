"""Every raw SQL statement of the core, named and kept together (PostgreSQL only, SPEC §2).

The hot path uses these where the ORM cannot say it in one statement (``RETURNING``, ``ON
CONFLICT``, a row and its journal in one read) or where compiling the query costs more than
running it. Everything else goes through the ORM. ``%s`` placeholders, in the order documented
above each statement; the decision path's and streams attaching's (at the end), ``%(name)s``.
"""

from __future__ import annotations

from django.db.models import Model

from . import state
from .choices import CALL_TERMINAL, CallStatus, QueuedStatus, RunStatus
from .models import Message, QueuedMessage, Run, Step, StreamFrame, Thread, ToolCall

_RUN = Run._meta.db_table
_STEP = Step._meta.db_table
_CALL = ToolCall._meta.db_table
_FRAME = StreamFrame._meta.db_table
_MESSAGE = Message._meta.db_table
_R, _C = RunStatus, CallStatus


def _moves(model: type[Model], sources: set[str], targets: set[str]) -> state.Writes:
    return state.Writes(model, frozenset(sources), frozenset(targets))


# The moves of the statements below that write a status (``state.writes``).
_TAKE = _moves(Run, {_R.QUEUED, _R.RUNNING}, {_R.RUNNING})
_ENDS = (
    _moves(Run, {_R.RUNNING}, {_R.COMPLETED}),
    _moves(Run, {_R.QUEUED, _R.RUNNING, _R.WAITING}, {_R.FAILED}),
    _moves(Run, {_R.QUEUED, _R.RUNNING, _R.WAITING, _R.CANCELLING}, {_R.CANCELLED}),
)
_FINISHES = _moves(ToolCall, {_C.APPROVED, _C.EXECUTING}, {_C.SUCCEEDED, _C.FAILED})
_PARKS = _moves(Run, {_R.RUNNING}, {_R.WAITING})
# A decision settles a pending call and may free its run (``SETTLE_CALL``).
SETTLES = (
    _moves(
        ToolCall,
        {_C.PENDING_APPROVAL},
        {_C.APPROVED, _C.REJECTED, _C.EXPIRED, _C.CANCELLED, _C.SUPERSEDED},
    ),
    _moves(Run, {_R.WAITING}, {_R.QUEUED}),
)


def insert_rows(model: type[Model]) -> str:
    """A common table expression's body inserting rows of ``model`` given as a JSON array of
    their columns by name (``json_rows``)."""
    table = model._meta.db_table
    return f"INSERT INTO {table} SELECT * FROM jsonb_populate_recordset(NULL::{table}, %s::jsonb)"


# Take a run's lease (leases.acquire): status, owner, deadline, run id, the two statuses a run
# may be taken in, now, the token passed on. Waits for the row lock, then re-checks the row.
ACQUIRE_LEASE = state.writes(
    f"UPDATE {_RUN} SET status = %s, lease_owner = %s,"
    " lease_token = lease_token + 1, lease_expires_at = %s"
    " WHERE id = %s AND status IN (%s, %s)"
    " AND (lease_owner = '' OR lease_expires_at < %s OR lease_token = %s)"
    " RETURNING lease_token",
    _TAKE,
)

# The conditions of a write fenced by a lease: token, owner.
FENCED = "AND lease_token = %s AND lease_owner = %s"


# A model's columns in its field order (``fetch_models`` reads them as the ORM would), under an
# alias (``prefix``: named with it, where another model's columns share their names).
def model_columns(model: type[Model], alias: str, prefix: str = "") -> str:
    return ", ".join(
        f"{alias}.{field.column}{f' AS {prefix}{field.column}' if prefix else ''}"
        for field in model._meta.concrete_fields
    )


# A run's row, locked, while a lease holds it, and its thread's (leases.lock): run id, token,
# owner.
LOCK_RUN = (
    f"SELECT {model_columns(Run, 'r')}, {model_columns(Thread, 't', 'thread_')} FROM {_RUN} r"
    f" JOIN {Thread._meta.db_table} t ON t.id = r.thread_id"
    f" WHERE r.id = %s {FENCED} FOR UPDATE OF r"
)
# The same as a statement's first common table expression ``k``: its writes name it, so the run's
# row is locked before a call's (every writer's order). A locking read answers the row's newest
# version even when the statement waited for the lock (a plain read: its snapshot's, before).
_LOCKED = f"k AS MATERIALIZED ({LOCK_RUN}),"

# A call's claim under its run's lock (calls.claim_call): ``approved → executing`` (checked by
# ``state.check`` first) if the run is running, stamping the digest of the args it releases (the
# row's, which the tool is called with): run id, token, owner, fence, started at, call id.
# Answers the run's and thread's columns (as LOCK_RUN) and whether the call moved (0 or 1); no
# row when the lease no longer holds the run.
CLAIM_CALL = state.writes(
    f"WITH {_LOCKED} c AS (UPDATE {_CALL} SET status = '{CallStatus.EXECUTING.value}',"
    " fence = %s, attempts = attempts + 1, started_at = %s, executed_args_digest = args_digest"
    f" WHERE id = %s AND status = '{CallStatus.APPROVED.value}' AND run_id = (SELECT id FROM k)"
    f" AND (SELECT status FROM k) = '{RunStatus.RUNNING.value}' RETURNING id)"
    " SELECT k.*, (SELECT count(*) FROM c) FROM k",
    _moves(ToolCall, {_C.APPROVED}, {_C.EXECUTING}),
)

# Every call of a run in the order its steps proposed them, each with ``delegated``: whether it
# started a child run (SPEC §14); a JSON array (NULL: none), read with the run.
_RUN_CALLS = (
    f"(SELECT json_agg(c ORDER BY c.position) FROM (SELECT c.*, EXISTS (SELECT 1 FROM {_RUN} k"
    f" WHERE k.parent_tool_call_id = c.id) AS delegated FROM {_CALL} c WHERE c.run_id = r.id) c)"
)

# A run and its thread (as LOCK_RUN), its journal (``name status`` pairs) and its calls in one
# read (journal.read_run): run id.
READ_RUN = (
    f"SELECT {model_columns(Run, 'r')}, {model_columns(Thread, 't', 'thread_')},"
    f" ARRAY(SELECT s.name || ' ' || s.status FROM {_STEP} s WHERE s.run_id = r.id), {_RUN_CALLS}"
    f" FROM {_RUN} r JOIN {Thread._meta.db_table} t ON t.id = r.thread_id WHERE r.id = %s"
)
# The same, locked, while a lease holds it: run id, token, owner.
READ_RUN_LOCKED = f"{READ_RUN} {FENCED} FOR UPDATE OF r"

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


# The thread's next message number and the message that takes it (transcript.append), if ``held``
# (a condition) holds, when given: id, thread id, run id, role, JSON content, created at, thread id.
def append_message(held: str = "") -> str:
    return (
        f"INSERT INTO {_MESSAGE} (id, thread_id, run_id, seq, role, content, created_at)"
        " SELECT %s, %s, %s, COALESCE(MAX(seq), 0) + 1, %s, %s::jsonb, %s"
        f" FROM {_MESSAGE} WHERE thread_id = %s{f' HAVING {held}' if held else ''} RETURNING seq"
    )


APPEND_MESSAGE = append_message()


def with_frames(
    *,
    before: str = "",
    sets: str = "",
    only: str = "",
    after: str = "",
    extra: str = "",
    joined: str = "",
) -> str:
    """A statement that reserves frame numbers on the run row and inserts the frames that take
    them (streams.emit), and says whose child the run is, if it waits on it (its frames go to
    that stream too).

    Writes the frames announce may ride on it: ``before``, common table expressions (each ending
    with a comma); ``sets``, more assignments of the run's row (each starting with a comma);
    ``only``, more conditions on it; ``after``, common table expressions without parameters that
    read the run's row as written (``r``: its ``id``, ``thread_id`` and ``status``; each starting
    with a comma); ``extra``, more columns of the one row it answers (each starting with a comma),
    which may read ``r`` and the common table expressions named in ``joined`` (each starting with
    a comma).
    Parameters: those of ``before``, count, those of ``sets``, run id, run id, count, created at,
    the frames as one JSON array of ``[kind, data]`` pairs (one text parameter: psycopg quotes
    and backslash-escapes every element of a text array in Python, by regular expression).
    """
    return (
        f"WITH {before}r AS (UPDATE {_RUN} SET last_seq = last_seq + %s{sets} WHERE id = %s{only}"
        " RETURNING id, thread_id, last_seq, parent_run_id, parent_tool_call_id, status),"
        f" f AS (INSERT INTO {_FRAME} (run_id, seq, kind, data, superseded, created_at)"
        " SELECT %s, r.last_seq - %s + f.n, f.frame ->> 0, f.frame -> 1, false, %s"
        " FROM r, jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS f(frame, n)"
        f" RETURNING seq){after}"
        f" SELECT f.seq, r.parent_run_id, r.parent_tool_call_id{extra} FROM f, r{joined}"
    )


EMIT_FRAMES = with_frames()
# The same into an ancestor's stream, unless it has ended (its ``finish`` is its last frame).
MIRROR_FRAMES = with_frames(only=" AND status NOT IN ('completed', 'failed', 'cancelled')")


# A model step's record, with its frames (proposals.record_model_step): the assistant message
# (as APPEND_MESSAGE), its tool calls (a JSON array of rows: every column, by name), the
# journal entry completed with its output and usage (status, JSON output, finished at, input,
# output and cached tokens, run id, name), the usage added to the run's totals (input, output,
# cached). RECORD_MODEL_STEP answers, after the frames' columns, the calls as stored (a JSON
# array, NULL: none).
def _record(held: str = "") -> str:
    """The record's writes; each only ``held`` (a condition), when given."""
    return (
        f"m AS ({append_message(held)}),"
        f" c AS ({insert_rows(ToolCall)}{f' WHERE {held}' if held else ''} RETURNING *),"
        f" s AS (UPDATE {_STEP} SET status = %s, output = %s::jsonb, finished_at = %s,"
        " input_tokens = %s, output_tokens = %s, cached_tokens = %s"
        f" WHERE run_id = %s AND name = %s{f' AND {held}' if held else ''}),"
    )


_RECORD = _record()
_USAGE = (
    ", input_tokens = input_tokens + %s, output_tokens = output_tokens + %s,"
    " cached_tokens = cached_tokens + %s"
)
_STORED = ", (SELECT json_agg(c ORDER BY c.position) FROM c)"
RECORD_MODEL_STEP = with_frames(before=_RECORD, sets=_USAGE, extra=_STORED)
# The same taking the run's lock first (``_LOCKED``: run id, token, owner, first), for a step
# that does not park and sends no call to the gate (which reads the run under its lock first):
# each write is made only if the lease holds the run and it runs (else no row, nothing written).
# Answers, after the frames' columns, the run's and thread's (as LOCK_RUN), then the calls.
_RUNNING = f"(SELECT status FROM k) = '{RunStatus.RUNNING.value}'"
RECORD_MODEL_STEP_LOCKING = with_frames(
    before=f"{_LOCKED} {_record(_RUNNING)}",
    sets=_USAGE,
    only=f" AND {_RUNNING}",
    extra=f", k.*{_STORED}",
    joined=", k",
)
# The same, parking the run: ``running → waiting`` (the pair checked by ``state.check`` first),
# its lease let go (runs.continue_or_park).
RECORD_MODEL_STEP_AND_PARK = state.writes(
    with_frames(
        before=_RECORD,
        sets=(
            f"{_USAGE}, status = '{RunStatus.WAITING.value}', lease_owner = '',"
            " lease_expires_at = NULL"
        ),
        only=f" AND status = '{RunStatus.RUNNING.value}'",
    ),
    _PARKS,
)


def _finish(run: str) -> str:
    """The call's compare-and-set and its journal entry, the call's run id given as ``run``."""
    return (
        f"c AS (UPDATE {_CALL} SET status = %s, result = %s::jsonb, error = %s, finished_at = %s,"
        " attempts = attempts + %s, started_at = COALESCE(%s, started_at),"
        f" fence = COALESCE(%s, fence) WHERE id = %s AND run_id = {run} AND status = %s"
        f" RETURNING *), s AS (INSERT INTO {_STEP} (run_id, name, status, output, attempts,"
        " input_tokens, output_tokens, cached_tokens, started_at, finished_at)"
        " SELECT %s, 'tool:' || c.id, 'completed', %s::jsonb, 1, 0, 0, 0, %s, %s FROM c),"
    )


# A tool step's record, with its frames (calls.finish_call): the call's compare-and-set to its
# outcome (status, JSON result, error, finished at, attempts added, started at and fence unless
# NULL, call id, run id, expected status; the pair checked by ``state.check`` first), its
# journal entry ``tool:<id>`` (run id, JSON output, started at, finished at), and the statuses
# of the run's other calls among the given ones (run id, call id, statuses). Answers, after the
# frames' columns: whether the call moved (0 or 1), those statuses (NULL: none), the call as
# stored (JSON; NULL: it did not move).
_TERMINAL = ", ".join(f"'{status.value}'" for status in sorted(CALL_TERMINAL))
_FINISHED = ", (SELECT count(*) FROM c), (SELECT statuses FROM o), (SELECT to_json(c) FROM c)"
FINISH_CALL = state.writes(
    with_frames(
        before=(
            f"{_finish('%s')} o AS (SELECT array_agg(DISTINCT status) AS statuses"
            f" FROM {_CALL} WHERE run_id = %s AND id <> %s AND status = ANY(%s)),"
        ),
        extra=_FINISHED,
    ),
    _FINISHES,
)
# The same taking the run's lock first (``_LOCKED``: run id, token, owner, first), the call's run
# being the locked one (no run id after the call id); the other calls' statuses take the
# statuses, then the call id. Those are read locking (``FOR SHARE``; ``FOR KEY SHARE`` does not
# conflict with a status update, so it keeps the old version), of the calls not yet settled:
# every writer of a call holds its run's lock, and what one committed while this statement waited
# for it is read as committed, not as the statement's snapshot saw it. Answers, after the
# frames' columns, the run's and thread's (as LOCK_RUN), then FINISH_CALL's; no row when the
# lease no longer holds the run.
FINISH_CALL_LOCKING = state.writes(
    with_frames(
        before=(
            f"{_LOCKED} {_finish('(SELECT id FROM k)')}"
            " o AS (SELECT array_agg(DISTINCT status) FILTER (WHERE status = ANY(%s)) AS statuses"
            f" FROM (SELECT status FROM {_CALL} WHERE run_id = (SELECT id FROM k) AND id <> %s"
            f" AND status NOT IN ({_TERMINAL}) FOR SHARE) x),"
        ),
        only=" AND EXISTS (SELECT FROM k)",
        extra=f", k.*{_FINISHED}",
        joined=", k",
    ),
    _FINISHES,
)

# A thread's transcript, in order, as ``(role, JSON content)`` (transcript.build_request), without
# the messages a truncation dropped (history.truncate): thread id.
TRANSCRIPT = (
    f"SELECT role, content FROM {_MESSAGE} WHERE thread_id = %s AND dropped_at IS NULL ORDER BY seq"
)

# A model step's first attempt opened (journal.begin_model_step): its journal entry (as
# BEGIN_STEP), with its ``step-start`` frame and the thread's transcript as it was before the
# statement (thread id); answers, after the frames' columns, the attempt and that transcript
# (a JSON array of ``[role, content]``).
_BEGIN = f"j AS ({BEGIN_STEP}),"
_READ_TRANSCRIPT = (
    "t AS (SELECT json_agg(json_build_array(role, content) ORDER BY seq) AS messages"
    f" FROM {_MESSAGE} WHERE thread_id = %s AND dropped_at IS NULL),"
)
_BEGUN = ", (SELECT attempts FROM j), (SELECT messages FROM t)"
BEGIN_MODEL_STEP = with_frames(before=f"{_BEGIN} {_READ_TRANSCRIPT}", extra=_BEGUN)
# The same after the results of the step before joined the transcript (as APPEND_MESSAGE;
# the transcript answered is still the one before them).
BEGIN_MODEL_STEP_AFTER_RESULTS = with_frames(
    before=f"{_BEGIN} {_READ_TRANSCRIPT} m AS ({APPEND_MESSAGE}),", extra=_BEGUN
)

# A run started on a new thread (runs.start_run): the thread and the run (as ``json_rows``),
# the user's message (as APPEND_MESSAGE).
START_RUN = f"WITH t AS ({insert_rows(Thread)}), r AS ({insert_rows(Run)}) {APPEND_MESSAGE}"

# A run's end (runs.end_run), as one compare-and-set that also lets its thread go if the run held
# it, and says whether the run moved, whether the thread was released and whether a queued
# message waits to start next: status, error code, error message, finished at, run id, the
# statuses it may leave, run id, thread id. The queue is read with the statement's snapshot, not
# again after waiting for the thread's lock: a message is queued under the run's lock, which the
# ending transaction holds (turns._start_once), so none commits while this statement runs.
END_RUN = state.writes(
    f"WITH e AS (UPDATE {_RUN} SET status = %s, error_code = %s, error_message = %s,"
    " finished_at = %s, lease_owner = '', lease_expires_at = NULL"
    " WHERE id = %s AND status = ANY(%s) RETURNING thread_id),"
    f" t AS (UPDATE {Thread._meta.db_table} SET active_run_id = NULL"
    " WHERE id = (SELECT thread_id FROM e) AND active_run_id = %s RETURNING id)"
    " SELECT EXISTS (SELECT 1 FROM e), EXISTS (SELECT 1 FROM t),"
    f" EXISTS (SELECT 1 FROM {QueuedMessage._meta.db_table} WHERE thread_id = %s"
    f" AND status = '{QueuedStatus.QUEUED.value}')",
    *_ENDS,
)

# The same with the run's last frames, when no message waits on its thread (runs.end_run): the
# statuses it may leave and the thread id (before); status, error code, error message, finished
# at (sets). No row, and nothing written, when the run had left those statuses or a message
# waits (its turn starts between the run's end and its ``finish`` frame: END_RUN).
_ENDING = (
    "e AS (SELECT %s::varchar[] AS sources, EXISTS"
    f" (SELECT FROM {QueuedMessage._meta.db_table} WHERE thread_id = %s"
    f" AND status = '{QueuedStatus.QUEUED.value}') AS queued),"
)
END_RUN_AND_FINISH = state.writes(
    with_frames(
        before=_ENDING,
        sets=(
            ", status = %s, error_code = %s, error_message = %s, finished_at = %s,"
            " lease_owner = '', lease_expires_at = NULL"
        ),
        only=" AND status = ANY((SELECT sources FROM e)::varchar[]) AND NOT (SELECT queued FROM e)",
        after=(
            f", t AS (UPDATE {Thread._meta.db_table} SET active_run_id = NULL"
            " WHERE id = (SELECT thread_id FROM r) AND active_run_id = (SELECT id FROM r))"
        ),
    ),
    *_ENDS,
)

# ---- Decisions (agent_core.decisions, the approval port) and streams attaching ----

# Lock a call's run and the call, and read both, whole (decisions.decision): ``%(call_id)s``.
# The run is locked first, then the call (the order every writer takes them); both rows are
# locked, so when the statement waited for a writer, PostgreSQL reads them again as that writer
# committed them (a row read but not locked would be the one the statement's snapshot saw).
LOCK_CALL = (
    f"SELECT {model_columns(Run, 'r')}, {model_columns(ToolCall, 'c')}"
    f" FROM {_CALL} c JOIN {_RUN} r ON r.id = c.run_id WHERE c.id = %(call_id)s"
    " FOR UPDATE OF r FOR NO KEY UPDATE OF c"
)


# What a run that a decision frees (``waiting → queued``) has emptied, beside its new status and
# lease deadline: the error of its last park, and the lease's owner (spelled out in SETTLE_CALL,
# and ``runs.resume_if_unblocked`` for the other ways a run is freed).
FREED_CLEARS = ("error_code", "error_message", "lease_owner")

# A decision on a pending call, as one compare-and-set with its stream frames
# (decisions.Decision.settle), which frees the run (``waiting → queued``, a new lease deadline,
# FREED_CLEARS emptied) when no other call of it waits on a person (``runs.resume_if_unblocked``).
# Parameters: ``%(status)s`` (the new one), ``%(decided_by_ref)s``, ``%(decided_via)s``,
# ``%(decided_at)s``, ``%(reason)s``, ``%(remember)s``, ``%(edited_args)s`` (JSON; NULL:
# unchanged; the old ones are kept as ``original_args``), ``%(edited_args_digest)s`` (NULL: same),
# ``%(finished_at)s`` (NULL: unchanged), ``%(call_id)s``, ``%(source)s`` (the status it must
# still have), ``%(open)s`` (the statuses ``runs.open_calls`` asks about), ``%(blocking)s`` (the
# blocking ones), ``%(lease_expires_at)s`` (the freed run's deadline); the frames' as
# ``decisions.frame_parameters`` makes them: ``%(run_id)s``, ``%(n)s``, ``%(created_at)s``,
# ``%(frames)s`` (one JSON array of ``[kind, data]`` pairs). Answers a row per frame: its
# ``seq``, the run's ``parent_run_id`` and ``parent_tool_call_id`` (whose stream mirrors it),
# ``others`` (the statuses among ``%(open)s`` of the run's other calls: every writer of a call
# holds its run's lock, which the decision holds) and ``run_status`` (after it); no row and no
# frame when the call was no longer pending. Each assignment of the run reads its row as it was.
SETTLE_CALL = state.writes(
    f"WITH c AS (UPDATE {_CALL} c SET status = %(status)s, decided_by_ref = %(decided_by_ref)s,"
    " decided_via = %(decided_via)s, decided_at = %(decided_at)s, reason = %(reason)s,"
    " remember = %(remember)s, args = COALESCE(%(edited_args)s::jsonb, c.args),"
    " original_args = CASE WHEN %(edited_args)s::jsonb IS NULL THEN c.original_args"
    " ELSE c.args END, args_digest = COALESCE(%(edited_args_digest)s, c.args_digest),"
    " finished_at = COALESCE(%(finished_at)s, c.finished_at)"
    " WHERE c.id = %(call_id)s AND c.status = %(source)s"
    f" RETURNING ARRAY(SELECT DISTINCT o.status FROM {_CALL} o"
    " WHERE o.run_id = c.run_id AND o.id <> c.id AND o.status = ANY(%(open)s)) AS open),"
    " u AS (SELECT NOT (open && %(blocking)s::varchar[]) AS unblocked FROM c),"
    f" r AS (UPDATE {_RUN} SET last_seq = last_seq + %(n)s,"
    " status = CASE WHEN status = 'waiting' AND (SELECT unblocked FROM u)"
    " THEN 'queued' ELSE status END,"
    " error_code = CASE WHEN status = 'waiting' AND (SELECT unblocked FROM u)"
    " THEN '' ELSE error_code END,"
    " error_message = CASE WHEN status = 'waiting' AND (SELECT unblocked FROM u)"
    " THEN '' ELSE error_message END,"
    " lease_owner = CASE WHEN status = 'waiting' AND (SELECT unblocked FROM u)"
    " THEN '' ELSE lease_owner END,"
    " lease_expires_at = CASE WHEN status = 'waiting' AND (SELECT unblocked FROM u)"
    " THEN %(lease_expires_at)s ELSE lease_expires_at END"
    " WHERE id = %(run_id)s AND EXISTS (SELECT FROM c)"
    " RETURNING id, last_seq, parent_run_id, parent_tool_call_id, status),"
    f" f AS (INSERT INTO {_FRAME} (run_id, seq, kind, data, superseded, created_at)"
    " SELECT %(run_id)s, r.last_seq - %(n)s + f.n, f.frame ->> 0, f.frame -> 1, false,"
    " %(created_at)s FROM r, jsonb_array_elements(%(frames)s::jsonb) WITH ORDINALITY AS f(frame, n)"
    " RETURNING seq)"
    " SELECT f.seq, r.parent_run_id, r.parent_tool_call_id, (SELECT open FROM c) AS others,"
    " r.status AS run_status FROM f, r",
    *SETTLES,
)

# A lock held to commit, by name (quotas: an actor's starts; idempotency: one key): ``%(name)s``.
ADVISORY_LOCK = "SELECT pg_advisory_xact_lock(hashtext(%(name)s))"
TRY_ADVISORY_LOCK = "SELECT pg_try_advisory_xact_lock(hashtext(%(name)s))"

# A run as its thread's owner follows it (access.visible_run: a stream attaching):
# ``%(run_id)s``, ``%(owner_ref)s``.
OWNED_RUN = (
    f"SELECT {model_columns(Run, 'r')} FROM {_RUN} r JOIN {Thread._meta.db_table} t"
    " ON t.id = r.thread_id WHERE r.id = %(run_id)s AND t.owner_ref = %(owner_ref)s"
)

# A run's end and its frames after a seq, in one statement and so one snapshot (live._catch_up:
# a stream attaching, catching up, or ending): ``%(run_id)s``, ``%(after)s``. The run's row first
# (its ``status``, ``error_code`` and ``error_message``), then a row per frame in seq order (its
# ``seq``, ``kind``, ``data`` and whether ``superseded``), each with NULL in the other's
# columns; none when the run is gone (its frames go with it, in the same transaction).
CATCH_UP = (
    "SELECT status, error_code, error_message, NULL AS seq, NULL AS kind, NULL AS data,"
    f" NULL AS superseded FROM {_RUN} WHERE id = %(run_id)s"
    " UNION ALL SELECT NULL, NULL, NULL, seq, kind, data, superseded"
    f" FROM {_FRAME} WHERE run_id = %(run_id)s AND seq > %(after)s ORDER BY seq NULLS FIRST"
)

# A token's user, whole, and the names of the user's groups (its roles) in one read
# (api.auth.TokenAuthentication): ``%(key)s``. Formatted once per process with the tables and
# columns of the configured token and user models (swappable: known once the apps are loaded).
TOKEN_USER = (
    "SELECT {columns}, ARRAY(SELECT g.{group_name} FROM {user_groups} ug"
    " JOIN {group} g ON g.{group_pk} = ug.{group_fk} WHERE ug.{user_fk} = u.{user_pk}) AS roles"
    " FROM {token} t JOIN {user} u ON u.{user_pk} = t.{token_user_fk} WHERE t.{token_key} = %(key)s"
)
