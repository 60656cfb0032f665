"""The benchmarks' own database beside the configured one, Django set up against it, and the
bulk load of agent tables the inbox and approve benchmarks share."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlparse, urlunparse

ROOT = Path(__file__).resolve().parent.parent


def bench_database_url(suffix: str) -> str:
    """A database named after the configured one plus ``suffix``, created if missing."""
    url = urlparse(os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/airlock"))
    name = url.path.lstrip("/") + suffix
    import psycopg

    admin = urlunparse(url._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
    return urlunparse(url._replace(path=f"/{name}"))


def setup_django(database_url: str) -> None:
    os.environ["DATABASE_URL"] = database_url
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.dev"
    os.environ["DEBUG"] = "0"  # no query log growing in memory
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


@dataclass(frozen=True, kw_only=True)
class Shape:
    """What ``bulk_load`` writes, as SQL expressions of ``g`` (the thread, 1 to ``threads``; one
    run and one assistant message each) and ``p`` (a call's position in its run, 0 to
    ``calls - 1``). ``tag`` goes in every id (``thr_<tag>00000001``, ``tc_<tag>0000000100``)."""

    tag: str
    threads: int
    calls: int  # per run
    owner: str  # the thread's owner, the run's actor and the calls' requester
    title: str
    created: str  # the thread's and the run's creation time
    run_status: str
    tool_name: str
    args: str
    status: str
    approver: str
    requested_at: str
    expires_at: str = "NULL"
    summary: str = "''"


_LOAD = """
SET session_replication_role = replica;  -- skip FK triggers while bulk loading consistent rows
TRUNCATE agent_core_thread, agent_core_run, agent_core_message, agent_core_toolcall,
         agent_core_step, agent_core_streamframe, approvals_decisionattempt,
         approvals_rememberedapproval CASCADE;
INSERT INTO agent_core_thread (id, owner_ref, agent, title, created_at, updated_at)
SELECT 'thr_{tag}' || lpad(g::text, 8, '0'), {owner}, 'support', {title}, {created}, now()
FROM generate_series(1, {threads}) g;
INSERT INTO agent_core_run (id, thread_id, agent, status, error_code, error_message, actor_ref,
    actor_roles, runner, lease_owner, lease_token, cancel_requested, last_seq, created_at,
    updated_at)
SELECT 'run_{tag}' || lpad(g::text, 8, '0'), 'thr_{tag}' || lpad(g::text, 8, '0'), 'support',
       {run_status}, '', '', {owner}, '[]', 'inline', '', 0, false, 0, {created}, now()
FROM generate_series(1, {threads}) g;
INSERT INTO agent_core_message (id, thread_id, run_id, seq, role, content, created_at)
SELECT 'msg_{tag}' || lpad(g::text, 8, '0'), 'thr_{tag}' || lpad(g::text, 8, '0'),
       'run_{tag}' || lpad(g::text, 8, '0'), 1, 'assistant', '[]', now()
FROM generate_series(1, {threads}) g;
INSERT INTO agent_core_toolcall (id, run_id, thread_id, message_id, step_name, position,
    provider_call_id, tool_name, kind, args, args_digest, status, requires_approval, approver,
    requester_ref, expires_at, remember, decided_by_ref, decided_via, reason, confirmation,
    summary, error, attempts, fence, requested_at)
SELECT 'tc_{tag}' || lpad(g::text, 8, '0') || lpad(p::text, 2, '0'),
       'run_{tag}' || lpad(g::text, 8, '0'), 'thr_{tag}' || lpad(g::text, 8, '0'),
       'msg_{tag}' || lpad(g::text, 8, '0'), 'llm:0', p, 'call_' || p, {tool_name}, 'action',
       {args}, repeat('0', 64), {status}, true, {approver}, {owner}, {expires_at}, false, '', '',
       '', '', {summary}, '', 0, 0, {requested_at}
FROM generate_series(1, {threads}) g CROSS JOIN generate_series(0, {calls} - 1) p;
SET session_replication_role = DEFAULT;
"""


def bulk_load(shape: Shape) -> None:
    """Empty the agent tables and fill them as ``shape`` says, with ``generate_series`` SQL."""
    from django.db import connection

    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(_LOAD.format(**asdict(shape)))
        # VACUUM, not only ANALYZE (apart: it cannot run in the load's transaction). Rows just
        # loaded have no visibility map, so an index-only scan would read the heap for each; the
        # planner walks the heap instead: the inbox's walk of a role's runs read 17,571 heap
        # blocks (~90 ms) rather than its index (~1 ms). On a live system autovacuum sets the
        # map of the rows that have settled, which is most of a million calls.
        cursor.execute("VACUUM (ANALYZE)")
    calls = shape.threads * shape.calls
    print(f"loaded {calls:,} calls in {time.perf_counter() - started:.1f} s")
