"""Every raw SQL statement of the approvals app, named and kept together (PostgreSQL only).

The pending inbox is read by the REST API and the console on every visit, every decision reads
its call's quorum and appends an audit row, and every request records its notifications;
compiled by the ORM (and built as model instances) these cost several times what running them
does. Named parameters (``%(call_id)s``), documented above each statement.
"""

from __future__ import annotations

from collections.abc import Callable

from agent_core import approvers
from agent_core.choices import REQUESTER, CallStatus
from agent_core.engine import sql, state
from agent_core.models import Run, StreamFrame, Thread, ToolCall

from .models import (
    Approval,
    DecisionAttempt,
    Delivery,
    DeliveryStatus,
    Escalation,
    NotificationOptOut,
    Quorum,
    Reminder,
)

_CALL = ToolCall._meta.db_table
_RUN = Run._meta.db_table
_FRAME = StreamFrame._meta.db_table

# The columns of a page of pending calls, as ``pending.PendingRow`` names them, and the joins they
# read, for the calls ``c`` of the page ``page`` (its ``id``s; ``PENDING_ROWS`` and the first pages
# below name it): each call joined to its run, with its quorum, the approvals given since it last
# started waiting (only for a call that needs several), the role it was escalated to, its amount
# and the call it duplicates. Only the page's rows are joined and read.
_ROWS = (
    "SELECT c.id, c.status, c.tool_name, c.kind, c.args, c.confirmation, c.summary, c.approver,"
    " c.requester_ref, c.thread_id, c.run_id, r.agent, r.parent_run_id, c.requested_at,"
    " c.expires_at, COALESCE(q.needed, 1) AS approvals_needed,"
    " CASE WHEN q.needed > 1 THEN ARRAY("
    f"  SELECT a.by_ref FROM {Approval._meta.db_table} a"
    "   WHERE a.tool_call_id = c.id AND a.at >= c.requested_at ORDER BY a.at, a.id)"
    " END AS approved_by,"
    " CASE WHEN q.needed > 1 THEN ARRAY("
    f"  SELECT a.at FROM {Approval._meta.db_table} a"
    "   WHERE a.tool_call_id = c.id AND a.at >= c.requested_at ORDER BY a.at, a.id)"
    " END AS approved_at,"
    f" (SELECT e.role FROM {Escalation._meta.db_table} e"
    "   WHERE e.tool_call_id = c.id AND e.escalated_at IS NOT NULL) AS escalated_to,"
    " c.amount,"
    # The oldest pending call of the same tool and args, if older than this one: this one
    # duplicates it.
    f" (SELECT d.id FROM {_CALL} d WHERE d.args_digest = c.args_digest"
    f"   AND d.status = '{CallStatus.PENDING_APPROVAL.value}' AND d.tool_name = c.tool_name"
    "   AND (d.requested_at, d.id) < (c.requested_at, c.id) ORDER BY d.requested_at, d.id"
    "   LIMIT 1) AS duplicates"
)
_ROWS_JOINS = (
    f" JOIN {_CALL} c ON c.id = page.id JOIN {Run._meta.db_table} r ON r.id = c.run_id"
    f" LEFT JOIN {Quorum._meta.db_table} q ON q.tool_call_id = c.id"
)

# The rows of the calls ``%(ids)s`` (an array of ids: a page's, whose keys the ORM selected from
# the filters, the cursor and the policy's ``decidable``), in that order (pending.rows).
PENDING_ROWS = (
    f"{_ROWS} FROM unnest(%(ids)s::varchar[]) WITH ORDINALITY AS page (id, n){_ROWS_JOINS}"
    " ORDER BY page.n"
)

# The decision path (the approval port).
# A call and its run locked and read, with the call's quorum (attempts.attempt, quorum.vote),
# as ``sql.LOCK_CALL``: ``%(call_id)s``. Answers, after the run's and the call's columns,
# ``quorum_needed`` and ``quorum_requester_counts`` (NULL for a call without a quorum). A quorum
# is written with its call and never changes, so the row the statement's snapshot saw is current.
LOCK_CALL_WITH_QUORUM = (
    f"SELECT {sql.model_columns(Run, 'r')}, {sql.model_columns(ToolCall, 'c')},"
    " q.needed AS quorum_needed, q.requester_counts AS quorum_requester_counts"
    f" FROM {_CALL} c JOIN {Run._meta.db_table} r ON r.id = c.run_id"
    f" LEFT JOIN {Quorum._meta.db_table} q ON q.tool_call_id = c.id WHERE c.id = %(call_id)s"
    " FOR UPDATE OF r FOR NO KEY UPDATE OF c"
)

# Append a decision attempt (attempts.audit): ``%(tool_call_id)s``, ``%(run_id)s``,
# ``%(thread_id)s``, ``%(tool_name)s``, ``%(action)s``, ``%(actor_ref)s``, ``%(via)s``,
# ``%(outcome)s``, ``%(detail)s``, ``%(created_at)s``, ``%(card_digest)s``,
# ``%(policy_digest)s``, ``%(args_digest)s`` (the approved args'); the table's trigger chains the
# row (``approvals.evidence``).
_ATTEMPT = DecisionAttempt._meta.db_table
AUDIT_ATTEMPT = (
    f"INSERT INTO {_ATTEMPT} (tool_call_id, run_id, thread_id, tool_name,"
    " action, actor_ref, via, outcome, detail, created_at, card_digest, policy_digest,"
    " args_digest) VALUES (%(tool_call_id)s, %(run_id)s, %(thread_id)s, %(tool_name)s,"
    " %(action)s, %(actor_ref)s, %(via)s, %(outcome)s, %(detail)s, %(created_at)s,"
    " %(card_digest)s, %(policy_digest)s, %(args_digest)s)"
)

# Record notifications in the transaction that asks (notify.delivery.record), leaving out the
# people who opted out: ``%(rows)s``, the rows as a JSON array of ``Delivery`` columns by name
# (no ``id``). Returns each inserted row's ``id`` and ``status``.
_DELIVERY = Delivery._meta.db_table
_DELIVERY_COLUMNS = ", ".join(
    f"{f.column}" for f in Delivery._meta.concrete_fields if not f.primary_key
)
RECORD_DELIVERIES = (
    f"INSERT INTO {_DELIVERY} ({_DELIVERY_COLUMNS}) SELECT {_DELIVERY_COLUMNS}"
    f" FROM jsonb_populate_recordset(NULL::{_DELIVERY}, %(rows)s::jsonb) d"
    f" WHERE NOT EXISTS (SELECT 1 FROM {NotificationOptOut._meta.db_table} o"
    "  WHERE o.actor_ref = d.recipient_ref AND d.recipient_ref <> '')"
    " RETURNING id, status"
)

# Claim the next attempt of a pending delivery before sending (notify.delivery.attempt), in its
# own commit: count it and start its lease (the next attempt is due when it is over), and start
# the sweep's backoff over (a task of the row runs: its queue moves). Claimed by
# the one chain of attempts whose turn it is — no attempt in flight and the row's attempts still
# those its task was scheduled with (its ticket) — or, once an attempt in flight outlived its
# lease (it died), by whichever task comes first; never once the attempts are used up. Any other
# task (a copy the sweep queued for a late one, a redelivered one) gets no row.
# ``%(lease)s`` (NOTIFICATION_LEASE, s), ``%(delivery_id)s``, ``%(attempts)s``
# (NOTIFICATION_ATTEMPTS), ``%(ticket)s``. Returns the attempt's number (``attempts``). The
# database's clock times every lease.
_PENDING = f"'{DeliveryStatus.PENDING.value}'"
CLAIM_DELIVERY = (
    f"UPDATE {_DELIVERY} SET attempts = attempts + 1, claimed_at = statement_timestamp(),"
    " due_at = statement_timestamp() + make_interval(secs => %(lease)s), sweeps = 0"
    f" WHERE id = %(delivery_id)s AND status = {_PENDING} AND attempts < %(attempts)s"
    " AND (claimed_at IS NULL AND attempts = %(ticket)s"
    "  OR claimed_at <= statement_timestamp() - make_interval(secs => %(lease)s))"
    " RETURNING attempts"
)

# Why a pending delivery could not be claimed (notify.delivery.attempt): its attempts so far,
# whether one of them is unfinished, the seconds left of its lease (0 when over) and the last
# error: ``attempts``, ``unfinished``, ``lease_left``, ``error``. ``%(lease)s``
# (NOTIFICATION_LEASE, s), ``%(delivery_id)s``. No row: it is settled.
CLAIM_REFUSED = (
    "SELECT attempts, claimed_at IS NOT NULL AS unfinished, GREATEST(0, EXTRACT(EPOCH FROM"
    "  claimed_at + make_interval(secs => %(lease)s) - statement_timestamp()))::float"
    f" AS lease_left, error FROM {_DELIVERY} WHERE id = %(delivery_id)s AND status = {_PENDING}"
)

# Pending deliveries nobody is working on (notify.delivery.resume_lost, the sweep): their next
# attempt a whole lease overdue, the most overdue first, at most NOTIFICATION_SWEEP_LIMIT (the
# partial index on pending rows' ``due_at``). Each is due again after a wait that doubles with
# every time the sweep queued it since its last claim (``sweeps``): a lease, two, four, … at most
# NOTIFICATION_SWEEP_BACKOFF_MAX; the next sweeps (of this or another process) leave it to the
# attempt this one schedules until then and a lease more. So a task late in a backed-up queue
# gets copies ever further apart (2, 3, 5, 9, … leases), not one every other lease, and a copy
# that was lost too is still followed by another. (The exponent stops at 60: 2^60 leases is past
# any maximum, and the power does not overflow.) ``%(longest)s``
# (NOTIFICATION_SWEEP_BACKOFF_MAX, s), ``%(lease)s`` (NOTIFICATION_LEASE, s), ``%(limit)s``.
# Returns their ``id`` and ``attempts`` (the ticket of the attempt scheduled: if the one it
# stands for was merely late, only one claims).
RESUME_LOST = (
    f"UPDATE {_DELIVERY} SET sweeps = sweeps + 1, due_at = statement_timestamp()"
    "  + make_interval(secs => LEAST(%(longest)s, %(lease)s * power(2, LEAST(sweeps, 60))))"
    f" WHERE id IN (SELECT id FROM {_DELIVERY}"
    f"  WHERE status = {_PENDING}"
    "  AND due_at <= statement_timestamp() - make_interval(secs => %(lease)s)"
    "  ORDER BY due_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED)"
    " RETURNING id, attempts"
)

# A decision's compare-and-set and frames with the attempt's audit row, in one round trip
# (services: an approval or rejection that settles the call): ``sql.SETTLE_CALL`` with the
# audit row first (``a``), appended whatever the compare-and-set found, as ``attempts.attempt``
# would. Parameters: SETTLE_CALL's, then AUDIT_ATTEMPT's but those SETTLE_CALL has already: the
# call (``%(call_id)s``), its run (``%(run_id)s``) and the time (``%(decided_at)s``).
SETTLE_AUDITED = state.writes(
    f"WITH a AS (INSERT INTO {_ATTEMPT} (tool_call_id, run_id, thread_id, tool_name,"
    " action, actor_ref, via, outcome, detail, created_at, card_digest, policy_digest,"
    " args_digest) VALUES (%(call_id)s, %(run_id)s, %(thread_id)s, %(tool_name)s,"
    " %(action)s, %(actor_ref)s, %(via)s, %(outcome)s, %(detail)s, %(decided_at)s,"
    " %(card_digest)s, %(policy_digest)s, %(args_digest)s)),"
    f" c AS (UPDATE {_CALL} c SET status = %(status)s, decided_by_ref = %(decided_by_ref)s,"
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
    *sql.SETTLES,
)

# Who may decide a waiting call by default (``ApprovalPolicy.decidable``, ``approvals.cases``,
# which says the same cases as an ORM filter): the cases below, each a status and a condition on
# the columns of the call aliased ``c`` (the private functions, called here, once, to write the
# statements out). Their parameters are the actor's ref, its roles (an array, without the
# requester marker: one plan for any number of roles) and a pattern (the roles as the
# alternatives of a regular expression, NULL for none), named ``%(ref)s``, ``%(roles)s``,
# ``%(pattern)s`` (``cases.parameters``).
_ESCALATION = Escalation._meta.db_table
_APPROVAL = CallStatus.PENDING_APPROVAL.value
_INPUT = CallStatus.PENDING_INPUT.value


def _approved_by_actor(c: str) -> str:
    """The actor already gave the call ``c`` its approval since it last started waiting (one of a
    quorum's): the call waits on others now, not on the actor (issue 42)."""
    return (
        f"EXISTS (SELECT 1 FROM {Approval._meta.db_table} a WHERE a.tool_call_id = {c}.id"
        f" AND a.by_ref = %(ref)s AND a.at >= {c}.requested_at)"
    )


def _by_requester(c: str) -> str:
    """The approver is the requester, and the actor made the request."""
    return f"{c}.approver = '{REQUESTER}' AND {c}.requester_ref = %(ref)s"


def _by_role(c: str) -> str:
    """The approver is one of the actor's roles."""
    return f"{c}.approver = ANY(%(roles)s)"


def _asked(c: str) -> str:
    """A question the actor asked is answered by the actor."""
    return f"{c}.requester_ref = %(ref)s"


def _by_one_of_roles(c: str) -> str:
    """Several roles may approve (stored joined: "legal|marketing"), one of them the actor's
    (``agent_core.approvers``: its ``LIKE`` names the partial indexes of those few calls)."""
    return approvers.one_of_sql(c, "%(pattern)s")


def _escalated(c: str) -> str:
    """Escalated to one of the actor's roles with the power to decide (``approvals.escalation``)."""
    return (
        f"{c}.id IN (SELECT e.tool_call_id FROM {_ESCALATION} e"
        " WHERE e.escalated_at IS NOT NULL AND e.may_decide AND e.role = ANY(%(roles)s))"
    )


_DECIDABLE = (
    (_APPROVAL, _by_requester),
    (_APPROVAL, _by_role),
    (_INPUT, _asked),
    (_APPROVAL, _by_one_of_roles),
    (_APPROVAL, _escalated),
)


def _on(status: str, where: Callable[[str], str], c: str) -> str:
    """The case ``status``, ``where`` on the call ``c``: an approval the actor already gave is not
    waiting on it."""
    mine = f" AND NOT {_approved_by_actor(c)}" if status == _APPROVAL else ""
    return f"{c}.status = '{status}' AND {where(c)}{mine}"


# How many waiting calls the actor may decide (``selectors.pending_count``): one index walk per
# case, each without the calls of the earlier cases of its status, no de-duplication (what those
# test is in the index walked, ``call_pending_by_approver`` holds ``requester_ref``, or read with
# the row anyway).
DECIDABLE_COUNT = "SELECT " + " + ".join(
    f"(SELECT count(*) FROM {_CALL} c WHERE {_on(status, where, 'c')}"
    + "".join(f" AND NOT ({before('c')})" for s, before in _DECIDABLE[:i] if s == status)
    + ")"
    for i, (status, where) in enumerate(_DECIDABLE)
)

# Whether the actor may see the call ``c`` (``agent_core.engine.access.in_visible_runs`` with
# ``ApprovalGate.decidable``): it is in a thread the actor owns or in a run holding a call it
# approves (any status: its roles as the stored approver, or escalated to one of them), may decide
# as the requester, or must answer. The cases of ``_DECIDABLE`` for its roles are within the
# roles'. A role's runs are one DISTINCT walk of ``call_approver_run`` per role, in run order
# (``approver <> ''`` names the index's predicate): with ``approver = ANY(roles)`` PostgreSQL hashed
# all of a role's calls instead (30,000 for 1,500 runs at 1M calls: twice the time).
_SEEN = (
    f"(c.thread_id IN (SELECT t.id FROM {Thread._meta.db_table} t WHERE t.owner_ref = %(ref)s)"
    "  OR c.run_id IN ("
    f"   (SELECT w.run_id FROM {_CALL} w WHERE {_on(_APPROVAL, _by_requester, 'w')})"
    f"   UNION ALL (SELECT w.run_id FROM {_CALL} w WHERE {_on(_INPUT, _asked, 'w')})"
    "   UNION ALL (SELECT d.run_id FROM unnest(%(roles)s::text[]) AS r (role), LATERAL"
    f"     (SELECT DISTINCT run_id FROM {_CALL} WHERE approver = r.role AND approver <> '') AS d)"
    f"   UNION ALL (SELECT w.run_id FROM {_CALL} w WHERE {_by_one_of_roles('w')})"
    f"   UNION ALL (SELECT w.run_id FROM {_CALL} w WHERE {_escalated('w')})))"
)
_WAITING = f"c.status IN ('{_APPROVAL}', '{_INPUT}')"

# How many waiting calls the actor may see (``selectors.seen_waiting_count``).
SEEN_WAITING_COUNT = f"SELECT count(*) FROM {_CALL} c WHERE {_WAITING} AND {_SEEN}"

# How many waiting calls there are (what an operator sees).
WAITING_COUNT = f"SELECT count(*) FROM {_CALL} c WHERE {_WAITING}"

# The orders of the inbox's pages by name (``approvals.api.filters.PendingPagination.orderings``;
# ``tests/approvals/test_named_counts.py`` checks that they agree): the sort key, its direction
# (the id's too, the tie-break) and where its nulls go (last, where it may be null).
_ORDERS = {
    "oldest": ("requested_at", "ASC", ""),
    "newest": ("requested_at", "DESC", ""),
    "deadline": ("expires_at", "ASC", " NULLS LAST"),
    "amount": ("amount", "DESC", " NULLS LAST"),
}


def _first_page(keys: Callable[[str, str], str], field: str, direction: str, nulls: str) -> str:
    """The rows (``_ROWS``) of the first page whose keys ``keys(columns, order)`` selects (``id``
    and the sort key ``field``), in the order ``field direction nulls``, then the id."""
    keys_order = f"{field} {direction}{nulls}, id {direction}"
    order = f"c.{field} {direction}{nulls}, c.id {direction}"
    page = keys(f"id, {field}", keys_order)
    return f"{_ROWS} FROM ({page}) AS page{_ROWS_JOINS} ORDER BY {order}"


def _decidable_keys(columns: str, order: str) -> str:
    """What the actor may decide, one ordered, limited branch per case (one index walk each)."""
    return (
        " UNION ".join(
            f"(SELECT {columns} FROM {_CALL} c WHERE {_on(status, where, 'c')}"
            f" ORDER BY {order} LIMIT %(n)s)"
            for status, where in _DECIDABLE
        )
        + f" ORDER BY {order} LIMIT %(n)s"
    )


# Whether the actor may not decide the waiting call ``c``: none of the cases holds (``IS NOT
# TRUE``: for an actor without roles the pattern is NULL, and so is its case).
_UNDECIDABLE = (
    "(" + " OR ".join(f"({_on(status, where, 'c')})" for status, where in _DECIDABLE) + ")"
    " IS NOT TRUE"
)


def _seen_undecidable_keys(columns: str, order: str) -> str:
    """What the actor may see but not decide."""
    return (
        f"SELECT {columns} FROM {_CALL} c WHERE {_WAITING} AND {_UNDECIDABLE} AND {_SEEN}"
        f" ORDER BY {order} LIMIT %(n)s"
    )


def _every_undecidable_keys(columns: str, order: str) -> str:
    """What the actor may not decide, of every run (an operator sees them all)."""
    return (
        f"SELECT {columns} FROM {_CALL} c WHERE {_WAITING} AND {_UNDECIDABLE}"
        f" ORDER BY {order} LIMIT %(n)s"
    )


# The first page of what the actor may decide, unfiltered (``selectors.first_page``), by order
# (``_ORDERS``): the keys ``pending.page`` would compile from ``ApprovalPolicy.decidable`` (one
# ordered, limited branch per case) and their rows, in one statement. Parameters: the cases' and
# the rows to read (``%(n)s``: the page and one more). Compiling the ORM's took ~2 ms a page at 1M
# calls.
DECIDABLE_PAGES = {sort: _first_page(_decidable_keys, *order) for sort, order in _ORDERS.items()}

# The first page of the waiting calls the actor may see but not decide, unfiltered (the console's
# *Waiting on others*, ``selectors.seen_first_page``), by order: the keys ``pending.page`` would
# compile from ``agent_core.engine.access.in_visible_runs`` and ``NOT ApprovalPolicy.decidable``
# and their rows; parameters as ``DECIDABLE_PAGES``'. ``EVERY_UNDECIDABLE_PAGES`` are an
# operator's (who sees every run). Building the ORM's query cost ~4.5 ms of Python a page at 1M
# calls, its plan the same (bench/README.md).
SEEN_UNDECIDABLE_PAGES = {
    sort: _first_page(_seen_undecidable_keys, *order) for sort, order in _ORDERS.items()
}
EVERY_UNDECIDABLE_PAGES = {
    sort: _first_page(_every_undecidable_keys, *order) for sort, order in _ORDERS.items()
}

# The recorded action calls since a time, grouped by everything a policy is asked about and
# what it answered then (simulation.simulate; one row per distinct group, with how many calls):
# agent, tool, args, requester, the requester's roles then, thread owner, required, approver, ttl
# (whole seconds, NULL: none), quorum, count. Parameters: ``%(since)s``.
SIMULATED_CALLS = (
    f"SELECT r.agent, c.tool_name, c.args, c.requester_ref, r.actor_roles, t.owner_ref,"
    " c.requires_approval,"
    " c.approver, round(EXTRACT(EPOCH FROM c.expires_at - c.requested_at))::bigint,"
    " COALESCE(q.needed, 1), count(*)"
    f" FROM {_CALL} c JOIN {Run._meta.db_table} r ON r.id = c.run_id"
    f" JOIN {Thread._meta.db_table} t ON t.id = c.thread_id"
    f" LEFT JOIN {Quorum._meta.db_table} q ON q.tool_call_id = c.id"
    " WHERE c.kind = 'action' AND c.requested_at >= %(since)s"
    " GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10"
)

# Approval analytics (approvals.analytics), each over the calls asked of a person since a time
# and decided by one (not by the policy, a grant, expiry or nobody): ``_DECIDED`` names them.
_BY_A_PERSON = "('', 'policy', 'remembered', 'expiry')"
_DECIDED = (
    f" FROM {_CALL} c WHERE c.requested_at >= %(since)s AND c.requires_approval"
    f" AND c.decided_at IS NOT NULL AND c.decided_via NOT IN {_BY_A_PERSON}"
)
_SECONDS = "EXTRACT(EPOCH FROM c.decided_at - c.requested_at)"

# Time to decision, p50 and p95 (s), of all, by tool and by approver (the stored approver:
# "requester", a role, or roles joined by "|"), in one scan: tool (NULL but on a tool's row),
# approver (NULL but on an approver's row), decisions, p50, p95 (NULL without decisions); the
# row of all (both NULL) is there even without decisions. Parameters: ``%(since)s``.
TIME_TO_DECISION = (
    "SELECT c.tool_name, c.approver, count(*),"
    f" percentile_cont(0.5) WITHIN GROUP (ORDER BY {_SECONDS}),"
    f" percentile_cont(0.95) WITHIN GROUP (ORDER BY {_SECONDS})"
    f"{_DECIDED} GROUP BY GROUPING SETS ((), (c.tool_name), (c.approver))"
    " ORDER BY 3 DESC, 1, 2"
)

# How the requests asked of a person since a time ended, of all and by tool (most asked first):
# tool (NULL on the row of all, there even without requests), asked, settled (decided, or failed
# with its run), rejected, expired, approved with edited args. Parameters: ``%(since)s``.
DECISION_RATES = (
    "SELECT c.tool_name, count(*),"
    " count(*) FILTER (WHERE c.decided_at IS NOT NULL OR c.status = 'failed'),"
    " count(*) FILTER (WHERE c.status = 'rejected'),"
    " count(*) FILTER (WHERE c.status = 'expired'),"
    " count(*) FILTER (WHERE c.original_args IS NOT NULL)"
    f" FROM {_CALL} c WHERE c.requested_at >= %(since)s AND c.requires_approval"
    " AND c.decided_via NOT IN ('policy', 'remembered')"
    " GROUP BY GROUPING SETS ((), (c.tool_name)) ORDER BY 2 DESC, 1"
)

# The calls waiting on an approval now, by how long they have waited: under 5 minutes, under an
# hour, under a day, longer (the partial index on pending calls). Parameters: ``%(now)s``.
PENDING_AGES = (
    "SELECT count(*) FILTER (WHERE c.requested_at > %(now)s - interval '5 minutes'),"
    " count(*) FILTER (WHERE c.requested_at <= %(now)s - interval '5 minutes'"
    "  AND c.requested_at > %(now)s - interval '1 hour'),"
    " count(*) FILTER (WHERE c.requested_at <= %(now)s - interval '1 hour'"
    "  AND c.requested_at > %(now)s - interval '1 day'),"
    " count(*) FILTER (WHERE c.requested_at <= %(now)s - interval '1 day')"
    f" FROM {_CALL} c WHERE c.status = '{_APPROVAL}'"
)

# Approvals given faster than RUBBER_STAMP_SECONDS, per approver, most first (at most 20):
# approver, fast approvals, approvals. Parameters: ``%(since)s``, ``%(seconds)s``.
RUBBER_STAMPS = (
    f"SELECT c.decided_by_ref, count(*) FILTER (WHERE {_SECONDS} < %(seconds)s), count(*)"
    f"{_DECIDED} AND c.status NOT IN ('rejected', 'expired', 'cancelled')"
    f" GROUP BY c.decided_by_ref HAVING count(*) FILTER (WHERE {_SECONDS} < %(seconds)s) > 0"
    " ORDER BY 2 DESC, 1 LIMIT 20"
)

# Claim the reminders that are due (reminders.remind_due, the sweep): unsent, of calls still
# waiting on an approval whose deadline is within REMIND_BEFORE and not yet past, at most
# ``%(limit)s``. One conditional UPDATE: a sweeper that waited for another's row lock finds the
# row sent and skips it, so each reminder is claimed once however many sweepers run. Returns the
# claimed calls' ids. Parameters: ``%(now)s``, ``%(before)s`` (an interval), ``%(limit)s``.
_REMINDER = Reminder._meta.db_table
CLAIM_REMINDERS = (
    f"UPDATE {_REMINDER} r SET sent_at = %(now)s WHERE r.tool_call_id IN ("
    f" SELECT m.tool_call_id FROM {_REMINDER} m JOIN {_CALL} c ON c.id = m.tool_call_id"
    f"  WHERE m.sent_at IS NULL AND c.status = '{_APPROVAL}'"
    "  AND c.expires_at > %(now)s AND c.expires_at <= %(now)s + %(before)s"
    "  ORDER BY c.expires_at LIMIT %(limit)s)"
    " AND r.sent_at IS NULL RETURNING r.tool_call_id"
)
