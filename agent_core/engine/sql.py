"""Every raw SQL statement of the core's hot path, each whole and named (PostgreSQL only, SPEC §2).

The hot path uses these where the ORM cannot say it in one statement (``RETURNING``, ``ON
CONFLICT``, a row and its journal in one read) or where compiling the query costs more than
running it. Everything else goes through the ORM. Each statement is written out in full, with
named parameters (``%(run_id)s``), and is read by column name (``rows.fetch_row``): nothing is
put together at run time, and no column is found by its position. Whole statements repeat some
text (the frame numbering, the run's lock); that is the price of reading each one alone.

The statements that write a run's stream frames (``stream_log.emit_with``) all end the same way:
``r`` bumps the run's frame counter by ``%(frame_count)s`` (the row lock it takes orders the
run's frames), ``f`` inserts the frames that take those numbers (``%(frames)s``: one JSON array
of ``[kind, data]`` pairs, written at ``%(frames_at)s``), and the statement answers one row with
``last_seq``, ``parent_run_id`` and ``parent_tool_call_id`` (whose stream the frames are
mirrored into), or no row when ``r`` matched no run (nothing was written). The decisions' and
streams attaching's statements are at the end.
"""

from __future__ import annotations

from django.db.models import Model

from ..choices import CallStatus, RunStatus
from ..models import Message, Run, StreamFrame, ToolCall
from . import state

_RUN = Run._meta.db_table
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
# A decision settles a pending call and may free its run (``settle_call``).
SETTLES = (
    _moves(
        ToolCall,
        {_C.PENDING_APPROVAL},
        {_C.APPROVED, _C.REJECTED, _C.EXPIRED, _C.CANCELLED, _C.SUPERSEDED},
    ),
    _moves(Run, {_R.WAITING}, {_R.QUEUED}),
)

# ---- Leases and reads of a run ----

# Take a run's lease (leases.acquire): a queued run, or a running one whose lease ran out or was
# passed on (``passed``: its token). Waits for the row lock, then re-checks the row.
ACQUIRE_LEASE = state.writes(
    "UPDATE agent_core_run SET status = 'running', lease_owner = %(owner)s,"
    " lease_token = lease_token + 1, lease_expires_at = %(expires_at)s"
    " WHERE id = %(run_id)s AND status IN ('queued', 'running')"
    " AND (lease_owner = '' OR lease_expires_at < %(now)s OR lease_token = %(passed)s)"
    " RETURNING lease_token",
    _TAKE,
)

# A run's row, locked, while the lease (``token``, ``owner``) holds it, and its thread's
# (leases.lock): ``run`` and ``thread``, each as JSON (``rows.from_json``).
LOCK_RUN = (
    "SELECT to_json(r) AS run, to_json(t) AS thread"
    " FROM agent_core_run r JOIN agent_core_thread t ON t.id = r.thread_id"
    " WHERE r.id = %(run_id)s AND r.lease_token = %(token)s AND r.lease_owner = %(owner)s"
    " FOR UPDATE OF r"
)

# A call's claim under its run's lock (calls.claim_call): ``approved → executing`` (checked by
# ``state.check`` first) if the run is running, stamping the digest of the args it releases (the
# row's, which the tool is called with). The run is locked first (``k``, as LOCK_RUN: every
# writer's order); a locking read answers the row's newest version even when the statement
# waited for the lock. Answers ``run``, ``thread`` (as LOCK_RUN) and ``claimed``; no row when
# the lease no longer holds the run.
CLAIM_CALL = state.writes(
    "WITH k AS MATERIALIZED (SELECT r.id, r.status, to_json(r) AS run, to_json(t) AS thread"
    " FROM agent_core_run r JOIN agent_core_thread t ON t.id = r.thread_id"
    " WHERE r.id = %(run_id)s AND r.lease_token = %(token)s AND r.lease_owner = %(owner)s"
    " FOR UPDATE OF r),"
    " c AS (UPDATE agent_core_toolcall SET status = 'executing', fence = %(token)s,"
    " attempts = attempts + 1, started_at = %(started_at)s, executed_args_digest = args_digest"
    " WHERE id = %(call_id)s AND status = 'approved' AND run_id = (SELECT id FROM k)"
    " AND (SELECT status FROM k) = 'running' RETURNING id)"
    " SELECT k.run, k.thread, EXISTS (SELECT FROM c) AS claimed FROM k",
    _moves(ToolCall, {_C.APPROVED}, {_C.EXECUTING}),
)

# A run and its thread (as LOCK_RUN), its ``journal`` (``name status`` pairs) and its ``calls``
# in the order its steps proposed them, each with ``delegated``: whether it started a child run
# (SPEC §14; a JSON array, NULL: none), in one read (journal.read_run).
READ_RUN = (
    "SELECT to_json(r) AS run, to_json(t) AS thread,"
    " ARRAY(SELECT s.name || ' ' || s.status FROM agent_core_step s WHERE s.run_id = r.id)"
    " AS journal,"
    " (SELECT json_agg(c ORDER BY c.position) FROM (SELECT c.*, EXISTS (SELECT FROM"
    " agent_core_run d WHERE d.parent_tool_call_id = c.id) AS delegated"
    " FROM agent_core_toolcall c WHERE c.run_id = r.id) c) AS calls"
    " FROM agent_core_run r JOIN agent_core_thread t ON t.id = r.thread_id"
    " WHERE r.id = %(run_id)s"
)
# The same, locked, while the lease (``token``, ``owner``) holds it.
READ_RUN_LOCKED = (
    "SELECT to_json(r) AS run, to_json(t) AS thread,"
    " ARRAY(SELECT s.name || ' ' || s.status FROM agent_core_step s WHERE s.run_id = r.id)"
    " AS journal,"
    " (SELECT json_agg(c ORDER BY c.position) FROM (SELECT c.*, EXISTS (SELECT FROM"
    " agent_core_run d WHERE d.parent_tool_call_id = c.id) AS delegated"
    " FROM agent_core_toolcall c WHERE c.run_id = r.id) c) AS calls"
    " FROM agent_core_run r JOIN agent_core_thread t ON t.id = r.thread_id"
    " WHERE r.id = %(run_id)s AND r.lease_token = %(token)s AND r.lease_owner = %(owner)s"
    " FOR UPDATE OF r"
)

# A run and its ancestors, nearest first, each ``id``, ``agent``, ``parent_tool_call_id``
# (delegation's depth and cycle checks, the chain an inbox card names).
ANCESTRY = (
    "WITH RECURSIVE up(id, agent, parent_run_id, parent_tool_call_id, depth) AS ("
    " SELECT id, agent, parent_run_id, parent_tool_call_id, 0 FROM agent_core_run"
    " WHERE id = %(run_id)s"
    " UNION ALL SELECT r.id, r.agent, r.parent_run_id, r.parent_tool_call_id, up.depth + 1"
    " FROM agent_core_run r JOIN up ON r.id = up.parent_run_id WHERE up.depth < 64)"
    " SELECT id, agent, parent_tool_call_id FROM up ORDER BY depth"
)

# ---- The transcript ----

# The thread's next message number and the message that takes it (transcript.append): the
# message's ``message_id``, ``thread_id``, ``run_id``, ``role``, ``content`` (JSON),
# ``message_at`` (``transcript.appended``). The ids the select list reads are cast: bound on the
# server, a parameter named twice takes one type, which its first use would otherwise make text.
APPEND_MESSAGE = (
    "INSERT INTO agent_core_message (id, thread_id, run_id, seq, role, content, created_at)"
    " SELECT %(message_id)s, %(thread_id)s::varchar, %(run_id)s::varchar,"
    " COALESCE(MAX(seq), 0) + 1, %(role)s, %(content)s::jsonb, %(message_at)s"
    " FROM agent_core_message WHERE thread_id = %(thread_id)s"
    " RETURNING seq"
)

# A thread's transcript, in order, each ``role`` and ``content`` (JSON) (transcript.build_request),
# without the messages a truncation dropped (history.truncate).
TRANSCRIPT = (
    "SELECT role, content FROM agent_core_message"
    " WHERE thread_id = %(thread_id)s AND dropped_at IS NULL ORDER BY seq"
)

# A run started on a new thread (runs.start_run): the ``thread`` and the ``run`` (each a JSON
# array of one row's columns by name, ``rows.json_rows``), the user's message (as
# APPEND_MESSAGE).
START_RUN = (
    "WITH t AS (INSERT INTO agent_core_thread"
    " SELECT * FROM jsonb_populate_recordset(NULL::agent_core_thread, %(thread)s::jsonb)),"
    " r AS (INSERT INTO agent_core_run"
    " SELECT * FROM jsonb_populate_recordset(NULL::agent_core_run, %(run)s::jsonb))"
    " INSERT INTO agent_core_message (id, thread_id, run_id, seq, role, content, created_at)"
    " SELECT %(message_id)s, %(thread_id)s::varchar, %(run_id)s::varchar,"
    " COALESCE(MAX(seq), 0) + 1, %(role)s, %(content)s::jsonb, %(message_at)s"
    " FROM agent_core_message WHERE thread_id = %(thread_id)s"
    " RETURNING seq"
)

# ---- Frames, and the writes recorded with them (``stream_log.emit_with``) ----

# Frames alone (stream_log.emit).
EMIT_FRAMES = (
    "WITH r AS (UPDATE agent_core_run SET last_seq = last_seq + %(frame_count)s"
    " WHERE id = %(run_id)s"
    " RETURNING id, last_seq, parent_run_id, parent_tool_call_id),"
    " f AS (INSERT INTO agent_core_streamframe (run_id, seq, kind, data, superseded, created_at)"
    " SELECT r.id, r.last_seq - %(frame_count)s + f.n, f.frame ->> 0, f.frame -> 1, false,"
    " %(frames_at)s FROM r, jsonb_array_elements(%(frames)s::jsonb) WITH ORDINALITY AS f(frame, n))"
    " SELECT r.last_seq, r.parent_run_id, r.parent_tool_call_id FROM r"
)
# The same into an ancestor's stream, unless it has ended (its ``finish`` is its last frame).
MIRROR_FRAMES = (
    "WITH r AS (UPDATE agent_core_run SET last_seq = last_seq + %(frame_count)s"
    " WHERE id = %(run_id)s AND status NOT IN ('completed', 'failed', 'cancelled')"
    " RETURNING id, last_seq, parent_run_id, parent_tool_call_id),"
    " f AS (INSERT INTO agent_core_streamframe (run_id, seq, kind, data, superseded, created_at)"
    " SELECT r.id, r.last_seq - %(frame_count)s + f.n, f.frame ->> 0, f.frame -> 1, false,"
    " %(frames_at)s FROM r, jsonb_array_elements(%(frames)s::jsonb) WITH ORDINALITY AS f(frame, n))"
    " SELECT r.last_seq, r.parent_run_id, r.parent_tool_call_id FROM r"
)

# Journal a model step's start, counting attempts (journal.begin_model_step, a retried
# attempt): ``run_id``, ``step`` (its name), ``started_at``. Answers ``attempts``.
BEGIN_STEP = (
    "INSERT INTO agent_core_step AS s (run_id, name, status, attempts, started_at)"
    " VALUES (%(run_id)s, %(step)s, 'started', 1, %(started_at)s)"
    " ON CONFLICT (run_id, name) DO UPDATE SET attempts = s.attempts + 1 RETURNING s.attempts"
)

# A model step's first attempt opened (journal.begin_model_step): its journal entry (as
# BEGIN_STEP), its ``step-start`` frame, and the thread's transcript (``thread_id``) as it was
# before the statement. Answers ``attempts`` and ``messages`` (a JSON array of
# ``[role, content]``).
BEGIN_MODEL_STEP = (
    "WITH j AS (INSERT INTO agent_core_step AS s (run_id, name, status, attempts, started_at)"
    " VALUES (%(run_id)s, %(step)s, 'started', 1, %(started_at)s)"
    " ON CONFLICT (run_id, name) DO UPDATE SET attempts = s.attempts + 1 RETURNING s.attempts),"
    " t AS (SELECT json_agg(json_build_array(role, content) ORDER BY seq) AS messages"
    " FROM agent_core_message WHERE thread_id = %(thread_id)s AND dropped_at IS NULL),"
    " r AS (UPDATE agent_core_run SET last_seq = last_seq + %(frame_count)s"
    " WHERE id = %(run_id)s"
    " RETURNING id, last_seq, parent_run_id, parent_tool_call_id),"
    " f AS (INSERT INTO agent_core_streamframe (run_id, seq, kind, data, superseded, created_at)"
    " SELECT r.id, r.last_seq - %(frame_count)s + f.n, f.frame ->> 0, f.frame -> 1, false,"
    " %(frames_at)s FROM r, jsonb_array_elements(%(frames)s::jsonb) WITH ORDINALITY AS f(frame, n))"
    " SELECT r.last_seq, r.parent_run_id, r.parent_tool_call_id,"
    " (SELECT attempts FROM j) AS attempts, (SELECT messages FROM t) AS messages FROM r"
)
# The same after the results of the step before joined the transcript (as APPEND_MESSAGE; the
# transcript answered is still the one before them).
BEGIN_MODEL_STEP_AFTER_RESULTS = (
    "WITH j AS (INSERT INTO agent_core_step AS s (run_id, name, status, attempts, started_at)"
    " VALUES (%(run_id)s, %(step)s, 'started', 1, %(started_at)s)"
    " ON CONFLICT (run_id, name) DO UPDATE SET attempts = s.attempts + 1 RETURNING s.attempts),"
    " t AS (SELECT json_agg(json_build_array(role, content) ORDER BY seq) AS messages"
    " FROM agent_core_message WHERE thread_id = %(thread_id)s AND dropped_at IS NULL),"
    " m AS (INSERT INTO agent_core_message (id, thread_id, run_id, seq, role, content, created_at)"
    " SELECT %(message_id)s, %(thread_id)s::varchar, %(run_id)s::varchar,"
    " COALESCE(MAX(seq), 0) + 1, %(role)s, %(content)s::jsonb, %(message_at)s"
    " FROM agent_core_message WHERE thread_id = %(thread_id)s"
    " RETURNING seq),"
    " r AS (UPDATE agent_core_run SET last_seq = last_seq + %(frame_count)s"
    " WHERE id = %(run_id)s"
    " RETURNING id, last_seq, parent_run_id, parent_tool_call_id),"
    " f AS (INSERT INTO agent_core_streamframe (run_id, seq, kind, data, superseded, created_at)"
    " SELECT r.id, r.last_seq - %(frame_count)s + f.n, f.frame ->> 0, f.frame -> 1, false,"
    " %(frames_at)s FROM r, jsonb_array_elements(%(frames)s::jsonb) WITH ORDINALITY AS f(frame, n))"
    " SELECT r.last_seq, r.parent_run_id, r.parent_tool_call_id,"
    " (SELECT attempts FROM j) AS attempts, (SELECT messages FROM t) AS messages FROM r"
)

# A model step's record, with its frames (proposals.record_model_step), the run's lock held by
# the caller: the assistant message (as APPEND_MESSAGE), its tool ``calls`` (a JSON array of
# rows, every column by name), the journal entry ``step`` set to ``step_status`` (completed)
# with its ``output`` (JSON)
# at ``finished_at`` and its usage (``input_tokens``, ``output_tokens``, ``cached_tokens``),
# which the run's totals add. Answers ``calls``: the calls as stored (a JSON array, NULL: none).
RECORD_MODEL_STEP = (
    "WITH m AS (INSERT INTO agent_core_message"
    " (id, thread_id, run_id, seq, role, content, created_at)"
    " SELECT %(message_id)s, %(thread_id)s::varchar, %(run_id)s::varchar,"
    " COALESCE(MAX(seq), 0) + 1, %(role)s, %(content)s::jsonb, %(message_at)s"
    " FROM agent_core_message WHERE thread_id = %(thread_id)s"
    " RETURNING seq),"
    " c AS (INSERT INTO agent_core_toolcall"
    " SELECT * FROM jsonb_populate_recordset(NULL::agent_core_toolcall, %(calls)s::jsonb)"
    " RETURNING *),"
    " s AS (UPDATE agent_core_step SET status = %(step_status)s, output = %(output)s::jsonb,"
    " finished_at = %(finished_at)s, input_tokens = %(input_tokens)s,"
    " output_tokens = %(output_tokens)s, cached_tokens = %(cached_tokens)s"
    " WHERE run_id = %(run_id)s AND name = %(step)s),"
    " r AS (UPDATE agent_core_run SET last_seq = last_seq + %(frame_count)s,"
    " input_tokens = input_tokens + %(input_tokens)s,"
    " output_tokens = output_tokens + %(output_tokens)s,"
    " cached_tokens = cached_tokens + %(cached_tokens)s WHERE id = %(run_id)s"
    " RETURNING id, last_seq, parent_run_id, parent_tool_call_id),"
    " f AS (INSERT INTO agent_core_streamframe (run_id, seq, kind, data, superseded, created_at)"
    " SELECT r.id, r.last_seq - %(frame_count)s + f.n, f.frame ->> 0, f.frame -> 1, false,"
    " %(frames_at)s FROM r, jsonb_array_elements(%(frames)s::jsonb) WITH ORDINALITY AS f(frame, n))"
    " SELECT r.last_seq, r.parent_run_id, r.parent_tool_call_id,"
    " (SELECT json_agg(c ORDER BY c.position) FROM c) AS calls FROM r"
)
# The same, parking the run: ``running → waiting`` (the pair checked by ``state.check`` first),
# its lease let go (runs.continue_or_park).
RECORD_MODEL_STEP_AND_PARK = state.writes(
    "WITH m AS (INSERT INTO agent_core_message"
    " (id, thread_id, run_id, seq, role, content, created_at)"
    " SELECT %(message_id)s, %(thread_id)s::varchar, %(run_id)s::varchar,"
    " COALESCE(MAX(seq), 0) + 1, %(role)s, %(content)s::jsonb, %(message_at)s"
    " FROM agent_core_message WHERE thread_id = %(thread_id)s"
    " RETURNING seq),"
    " c AS (INSERT INTO agent_core_toolcall"
    " SELECT * FROM jsonb_populate_recordset(NULL::agent_core_toolcall, %(calls)s::jsonb)"
    " RETURNING *),"
    " s AS (UPDATE agent_core_step SET status = %(step_status)s, output = %(output)s::jsonb,"
    " finished_at = %(finished_at)s, input_tokens = %(input_tokens)s,"
    " output_tokens = %(output_tokens)s, cached_tokens = %(cached_tokens)s"
    " WHERE run_id = %(run_id)s AND name = %(step)s),"
    " r AS (UPDATE agent_core_run SET last_seq = last_seq + %(frame_count)s,"
    " input_tokens = input_tokens + %(input_tokens)s,"
    " output_tokens = output_tokens + %(output_tokens)s,"
    " cached_tokens = cached_tokens + %(cached_tokens)s,"
    " status = 'waiting', lease_owner = '', lease_expires_at = NULL"
    " WHERE id = %(run_id)s AND status = 'running'"
    " RETURNING id, last_seq, parent_run_id, parent_tool_call_id),"
    " f AS (INSERT INTO agent_core_streamframe (run_id, seq, kind, data, superseded, created_at)"
    " SELECT r.id, r.last_seq - %(frame_count)s + f.n, f.frame ->> 0, f.frame -> 1, false,"
    " %(frames_at)s FROM r, jsonb_array_elements(%(frames)s::jsonb) WITH ORDINALITY AS f(frame, n))"
    " SELECT r.last_seq, r.parent_run_id, r.parent_tool_call_id,"
    " (SELECT json_agg(c ORDER BY c.position) FROM c) AS calls FROM r",
    _PARKS,
)
# RECORD_MODEL_STEP taking the run's lock first (``k``, as CLAIM_CALL: the lease's ``token``
# and ``owner``), for a step that does not park and sends no call to the gate (which reads the
# run under its lock first): each write is made only if the lease holds the run and it runs
# (else no row, nothing written). Answers ``run`` and ``thread`` (as LOCK_RUN) too.
RECORD_MODEL_STEP_LOCKING = (
    "WITH k AS MATERIALIZED (SELECT r.id, r.status, to_json(r) AS run, to_json(t) AS thread"
    " FROM agent_core_run r JOIN agent_core_thread t ON t.id = r.thread_id"
    " WHERE r.id = %(run_id)s AND r.lease_token = %(token)s AND r.lease_owner = %(owner)s"
    " FOR UPDATE OF r),"
    " m AS (INSERT INTO agent_core_message"
    " (id, thread_id, run_id, seq, role, content, created_at)"
    " SELECT %(message_id)s, %(thread_id)s::varchar, %(run_id)s::varchar,"
    " COALESCE(MAX(seq), 0) + 1, %(role)s, %(content)s::jsonb, %(message_at)s"
    " FROM agent_core_message WHERE thread_id = %(thread_id)s"
    " HAVING (SELECT status FROM k) = 'running' RETURNING seq),"
    " c AS (INSERT INTO agent_core_toolcall"
    " SELECT * FROM jsonb_populate_recordset(NULL::agent_core_toolcall, %(calls)s::jsonb)"
    " WHERE (SELECT status FROM k) = 'running' RETURNING *),"
    " s AS (UPDATE agent_core_step SET status = %(step_status)s, output = %(output)s::jsonb,"
    " finished_at = %(finished_at)s, input_tokens = %(input_tokens)s,"
    " output_tokens = %(output_tokens)s, cached_tokens = %(cached_tokens)s"
    " WHERE run_id = %(run_id)s AND name = %(step)s AND (SELECT status FROM k) = 'running'),"
    " r AS (UPDATE agent_core_run SET last_seq = last_seq + %(frame_count)s,"
    " input_tokens = input_tokens + %(input_tokens)s,"
    " output_tokens = output_tokens + %(output_tokens)s,"
    " cached_tokens = cached_tokens + %(cached_tokens)s"
    " WHERE id = %(run_id)s AND (SELECT status FROM k) = 'running'"
    " RETURNING id, last_seq, parent_run_id, parent_tool_call_id),"
    " f AS (INSERT INTO agent_core_streamframe (run_id, seq, kind, data, superseded, created_at)"
    " SELECT r.id, r.last_seq - %(frame_count)s + f.n, f.frame ->> 0, f.frame -> 1, false,"
    " %(frames_at)s FROM r, jsonb_array_elements(%(frames)s::jsonb) WITH ORDINALITY AS f(frame, n))"
    " SELECT r.last_seq, r.parent_run_id, r.parent_tool_call_id, k.run, k.thread,"
    " (SELECT json_agg(c ORDER BY c.position) FROM c) AS calls FROM r, k"
)

# A tool step's record, with its frame (calls.finish_call), the run's lock held by the caller:
# the call's compare-and-set from ``expected`` to its outcome (``status``, ``result`` as JSON,
# ``error``, ``finished_at``, ``attempts`` added, ``started_at`` and ``fence`` unless NULL; the
# pair checked by ``state.check`` first), its journal entry ``tool:<id>`` (``output``, JSON),
# and the statuses of the run's other calls among ``open``. Answers ``finished`` (whether the
# call moved), ``statuses`` (NULL: none) and ``call``, as stored (JSON; NULL: it did not move).
FINISH_CALL = state.writes(
    "WITH c AS (UPDATE agent_core_toolcall SET status = %(status)s, result = %(result)s::jsonb,"
    " error = %(error)s, finished_at = %(finished_at)s, attempts = attempts + %(attempts)s,"
    " started_at = COALESCE(%(started_at)s, started_at), fence = COALESCE(%(fence)s, fence)"
    " WHERE id = %(call_id)s AND run_id = %(run_id)s AND status = %(expected)s RETURNING *),"
    " s AS (INSERT INTO agent_core_step (run_id, name, status, output, attempts, input_tokens,"
    " output_tokens, cached_tokens, started_at, finished_at)"
    " SELECT %(run_id)s, 'tool:' || c.id, 'completed', %(output)s::jsonb, 1, 0, 0, 0,"
    " %(finished_at)s, %(finished_at)s FROM c),"
    " o AS (SELECT array_agg(DISTINCT status) AS statuses FROM agent_core_toolcall"
    " WHERE run_id = %(run_id)s AND id <> %(call_id)s AND status = ANY(%(open)s)),"
    " r AS (UPDATE agent_core_run SET last_seq = last_seq + %(frame_count)s"
    " WHERE id = %(run_id)s"
    " RETURNING id, last_seq, parent_run_id, parent_tool_call_id),"
    " f AS (INSERT INTO agent_core_streamframe (run_id, seq, kind, data, superseded, created_at)"
    " SELECT r.id, r.last_seq - %(frame_count)s + f.n, f.frame ->> 0, f.frame -> 1, false,"
    " %(frames_at)s FROM r, jsonb_array_elements(%(frames)s::jsonb) WITH ORDINALITY AS f(frame, n))"
    " SELECT r.last_seq, r.parent_run_id, r.parent_tool_call_id,"
    " EXISTS (SELECT FROM c) AS finished, (SELECT statuses FROM o) AS statuses,"
    " (SELECT to_json(c) FROM c) AS call FROM r",
    _FINISHES,
)
# The same taking the run's lock first (``k``, as CLAIM_CALL). The other calls' statuses are
# read locking (``FOR SHARE``; ``FOR KEY SHARE`` does not conflict with a status update, so it
# keeps the old version), of the calls not yet settled: every writer of a call holds its run's
# lock, and what one committed while this statement waited for it is read as committed, not as
# the statement's snapshot saw it. Answers ``run`` and ``thread`` (as LOCK_RUN) too; no row
# when the lease no longer holds the run.
FINISH_CALL_LOCKING = state.writes(
    "WITH k AS MATERIALIZED (SELECT r.id, r.status, to_json(r) AS run, to_json(t) AS thread"
    " FROM agent_core_run r JOIN agent_core_thread t ON t.id = r.thread_id"
    " WHERE r.id = %(run_id)s AND r.lease_token = %(token)s AND r.lease_owner = %(owner)s"
    " FOR UPDATE OF r),"
    " c AS (UPDATE agent_core_toolcall SET status = %(status)s, result = %(result)s::jsonb,"
    " error = %(error)s, finished_at = %(finished_at)s, attempts = attempts + %(attempts)s,"
    " started_at = COALESCE(%(started_at)s, started_at), fence = COALESCE(%(fence)s, fence)"
    " WHERE id = %(call_id)s AND run_id = (SELECT id FROM k) AND status = %(expected)s"
    " RETURNING *),"
    " s AS (INSERT INTO agent_core_step (run_id, name, status, output, attempts, input_tokens,"
    " output_tokens, cached_tokens, started_at, finished_at)"
    " SELECT %(run_id)s, 'tool:' || c.id, 'completed', %(output)s::jsonb, 1, 0, 0, 0,"
    " %(finished_at)s, %(finished_at)s FROM c),"
    " o AS (SELECT array_agg(DISTINCT status) FILTER (WHERE status = ANY(%(open)s)) AS statuses"
    " FROM (SELECT status FROM agent_core_toolcall WHERE run_id = (SELECT id FROM k)"
    " AND id <> %(call_id)s AND status NOT IN ('cancelled', 'expired', 'failed', 'refused',"
    " 'rejected', 'succeeded', 'superseded') FOR SHARE) x),"
    " r AS (UPDATE agent_core_run SET last_seq = last_seq + %(frame_count)s"
    " WHERE id = %(run_id)s AND EXISTS (SELECT FROM k)"
    " RETURNING id, last_seq, parent_run_id, parent_tool_call_id),"
    " f AS (INSERT INTO agent_core_streamframe (run_id, seq, kind, data, superseded, created_at)"
    " SELECT r.id, r.last_seq - %(frame_count)s + f.n, f.frame ->> 0, f.frame -> 1, false,"
    " %(frames_at)s FROM r, jsonb_array_elements(%(frames)s::jsonb) WITH ORDINALITY AS f(frame, n))"
    " SELECT r.last_seq, r.parent_run_id, r.parent_tool_call_id, k.run, k.thread,"
    " EXISTS (SELECT FROM c) AS finished, (SELECT statuses FROM o) AS statuses,"
    " (SELECT to_json(c) FROM c) AS call FROM r, k",
    _FINISHES,
)

# ---- A run's end ----

# A run's end (runs.end_run), as one compare-and-set from one of ``sources`` that also lets its
# thread go if the run held it. Answers ``ended`` (whether the run moved), ``released``
# (whether the thread was) and ``queued`` (whether a message waits to start next). The queue is
# read with the statement's snapshot, not again after waiting for the thread's lock: a message
# is queued under the run's lock, which the ending transaction holds (turns._start_once), so
# none commits while this statement runs.
END_RUN = state.writes(
    "WITH e AS (UPDATE agent_core_run SET status = %(status)s, error_code = %(error_code)s,"
    " error_message = %(error_message)s, finished_at = %(finished_at)s, lease_owner = '',"
    " lease_expires_at = NULL WHERE id = %(run_id)s AND status = ANY(%(sources)s)"
    " RETURNING thread_id),"
    " t AS (UPDATE agent_core_thread SET active_run_id = NULL"
    " WHERE id = (SELECT thread_id FROM e) AND active_run_id = %(run_id)s RETURNING id)"
    " SELECT EXISTS (SELECT FROM e) AS ended, EXISTS (SELECT FROM t) AS released,"
    " EXISTS (SELECT FROM agent_core_queuedmessage WHERE thread_id = %(thread_id)s"
    " AND status = 'queued') AS queued",
    *_ENDS,
)
# The same with the run's last frames, when no message waits on its thread (runs.end_run). No
# row, and nothing written, when the run had left ``sources`` or a message waits (its turn
# starts between the run's end and its ``finish`` frame: END_RUN).
END_RUN_AND_FINISH = state.writes(
    "WITH e AS (SELECT EXISTS (SELECT FROM agent_core_queuedmessage"
    " WHERE thread_id = %(thread_id)s AND status = 'queued') AS queued),"
    " r AS (UPDATE agent_core_run SET last_seq = last_seq + %(frame_count)s,"
    " status = %(status)s, error_code = %(error_code)s, error_message = %(error_message)s,"
    " finished_at = %(finished_at)s, lease_owner = '', lease_expires_at = NULL"
    " WHERE id = %(run_id)s AND status = ANY(%(sources)s::varchar[])"
    " AND NOT (SELECT queued FROM e)"
    " RETURNING id, thread_id, last_seq, parent_run_id, parent_tool_call_id),"
    " f AS (INSERT INTO agent_core_streamframe (run_id, seq, kind, data, superseded, created_at)"
    " SELECT r.id, r.last_seq - %(frame_count)s + f.n, f.frame ->> 0, f.frame -> 1, false,"
    " %(frames_at)s FROM r, jsonb_array_elements(%(frames)s::jsonb)"
    " WITH ORDINALITY AS f(frame, n)),"
    " t AS (UPDATE agent_core_thread SET active_run_id = NULL"
    " WHERE id = (SELECT thread_id FROM r) AND active_run_id = (SELECT id FROM r))"
    " SELECT r.last_seq, r.parent_run_id, r.parent_tool_call_id FROM r",
    *_ENDS,
)

# ---- A model's columns, for the statements that read whole rows ----


def model_columns(model: type[Model], alias: str, prefix: str = "") -> str:
    """A model's columns in its field order, under an alias (``prefix``: named with it)."""
    return ", ".join(
        f"{alias}.{field.column}{f' AS {prefix}{field.column}' if prefix else ''}"
        for field in model._meta.concrete_fields
    )


# ---- Decisions (agent_core.engine.decisions, the approval port) and streams attaching ----

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
    f"SELECT {model_columns(Run, 'r')} FROM {_RUN} r JOIN agent_core_thread t"
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
