"""Benchmark: the pending-approvals inbox at scale, and approve latency under concurrent deciders.

    DATABASE_URL=postgres://…/airlock python bench/pending.py [--reuse] [--requests 200]
                                                              [--no-approve]

Uses the database ``<name>_bench`` next to ``DATABASE_URL`` (created if missing, its agent tables
emptied and refilled): 50,000 threads, one run each, 1,000,000 tool calls of which 10,000 are
pending (two in each of 5,000 waiting runs; approver: requester 60 %, finance 30 %, marketing
10 %). Bulk-loaded with ``bench.database.bulk_load``. Then:

1. ``GET /agent/approvals/pending`` in process (DRF APIClient, no network): median / p99 of the
   first page and of a deep cursor page, for a finance approver and for a requester; plus the
   page's statements' own execution time (``EXPLAIN ANALYZE``) and whether they use the partial
   indexes. Target (issue 18): the first page's p99 ≤ 20 ms, printed as met / not met.
2. (not with ``--no-approve``) ``POST /agent/tool-call/approve`` against a real daphne on a
   random port: 50 threads deciding 1,000 distinct calls at once (token auth); median / p99
   latency and throughput. Each approved call has a sibling still pending, so the run stays
   parked: this measures the decision path, not the agent loop.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.database import Shape, bench_database_url, bulk_load, setup_django  # noqa: E402

THREADS, CALLS_PER_RUN, DECIDERS, APPROVALS = 50_000, 20, 50, 1_000
FIRST_PAGE_P99_MS = 20  # issue 18: the inbox's first page at 1M calls / 10k pending, server time


def shape(requester_ref: str, *, threads: int = THREADS, calls: int = CALLS_PER_RUN) -> Shape:
    """The pending inbox at scale: one run in ten waits with its first two calls pending, for
    the requester (60 %), finance (30 %) or marketing (10 %); ``requester_ref`` owns one thread
    in 50."""
    owner = f"CASE WHEN g % 50 = 3 THEN '{requester_ref}' ELSE 'user:b' || (g % 1000) END"
    created = "now() - interval '30 days' + g * interval '50 seconds'"
    return Shape(
        tag="b",
        threads=threads,
        calls=calls,
        owner=owner,
        title="'bench ' || g",
        created=created,
        run_status="CASE WHEN g % 10 = 3 THEN 'waiting' ELSE 'completed' END",
        tool_name="(ARRAY['issue_refund', 'purge_cache', 'send_campaign'])[p % 3 + 1]",
        args="""'{"order_id": "A-1001", "amount": "10"}'""",
        status="CASE WHEN g % 10 = 3 AND p < 2 THEN 'pending_approval'"
        " WHEN p % 7 = 0 THEN 'rejected' ELSE 'succeeded' END",
        approver="CASE WHEN g % 10 = 3 AND (g / 10) % 10 >= 9 THEN 'marketing'"
        " WHEN g % 10 = 3 AND (g / 10) % 10 >= 6 THEN 'finance' ELSE 'requester' END",
        requested_at=f"{created} + p * interval '1 second'",
    )


def load(requester_ref: str, *, reuse: bool) -> None:
    from agent_core.models import ToolCall

    if reuse and ToolCall.objects.count() == THREADS * CALLS_PER_RUN:
        print("reusing the loaded data")
        return
    bulk_load(shape(requester_ref))


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1000, p99 * 1000


def time_requests(client: Any, url: str, params: dict[str, Any], n: int) -> tuple[float, float]:
    for _ in range(10):
        assert client.get(url, params).status_code == 200
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        response = client.get(url, params)
        samples.append(time.perf_counter() - started)
        assert response.status_code == 200
    return percentiles(samples)


def sql_time(actor: Any, cursor: str | None) -> tuple[float, bool]:
    """The page's statements' execution time in PostgreSQL, and whether they used a partial index
    (every branch of the page's keys should): the first page is one named statement
    (``sql.DECIDABLE_PAGES``), a later page its keys compiled by the ORM, then their rows
    (``sql.PENDING_ROWS``)."""
    from django.db import connection

    from approvals import cases, sql
    from approvals.api.filters import PendingPagination

    n = PendingPagination().page_size + 1
    if cursor is None:
        statements = [(sql.DECIDABLE_PAGES["oldest"], {**cases.parameters(actor), "n": n})]
    else:
        keys = page_keys(actor, cursor)
        ids = [key["id"] for key in keys]
        statements = [keys.query.sql_with_params(), (sql.PENDING_ROWS, {"ids": ids})]
    total, indexed = 0.0, False
    with connection.cursor() as c:
        for statement, params in statements:
            c.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {statement}", params)
            plan = c.fetchone()[0][0]
            total += plan["Execution Time"]
            indexed = indexed or "call_pending" in str(plan)
    return total, indexed


def page_keys(actor: Any, cursor: str | None) -> Any:
    """The query of the page's keys, as the API compiles it past the first page or with a filter
    (one branch per case)."""
    from approvals.api.filters import PendingPagination
    from approvals.selectors import all_calls, pending_branches

    params = {"cursor": cursor} if cursor else {}
    return PendingPagination().keys_queryset(all_calls(), params, branches=pending_branches(actor))


def explain_keys(actor: Any) -> str:
    """``EXPLAIN ANALYZE`` of the first page's keys as compiled (a filtered first page's shape):
    each branch should walk its index in order and stop after one page (a ``Limit`` over an
    index scan, no sort of every match)."""
    from django.db import connection

    sql, sql_params = page_keys(actor, None).query.sql_with_params()
    with connection.cursor() as c:
        c.execute(f"EXPLAIN (ANALYZE, COSTS OFF, TIMING ON) {sql}", sql_params)
        return "\n".join(row[0] for row in c.fetchall())


def deep_cursor(actor: Any, depth: int) -> str:
    from approvals.api.filters import PendingPagination
    from approvals.selectors import pending_for

    return PendingPagination().cursor_after("oldest", pending_for(actor)[depth - 1])


def bench_pending(users: dict[str, Any], n: int) -> list[str]:
    """One table row per viewer and page: server time in process (median, p99), the SQL's own
    time, and the first page's p99 against the target."""
    from rest_framework.test import APIClient

    from agent_core.actors import actor_for_user
    from approvals.selectors import pending_count

    lines = []
    for name, depth in (("finance approver", 2_500), ("requester", 1_000)):
        user = users[name]
        actor = actor_for_user(user)
        client = APIClient(SERVER_NAME="localhost")  # an ALLOWED_HOSTS name
        client.force_authenticate(user)
        visible = pending_count(actor)
        for page, cursor in (
            ("first page", None),
            (f"page after {depth:,}", deep_cursor(actor, depth)),
        ):
            params = {"cursor": cursor} if cursor else {}
            median, p99 = time_requests(client, "/agent/approvals/pending", params, n)
            sql_ms, indexed = sql_time(actor, cursor)
            verdict = target_verdict(p99) if cursor is None else "—"
            lines.append(
                f"| {name} ({visible:,} visible) | {page} | {median:.1f} | {p99:.1f} | "
                f"{sql_ms:.2f} | {'yes' if indexed else 'no'} | {verdict} |"
            )
    return lines


def target_verdict(p99_ms: float) -> str:
    """The first page's p99 server time against issue 18's target."""
    return f"{'met' if p99_ms <= FIRST_PAGE_P99_MS else 'not met'} (≤ {FIRST_PAGE_P99_MS} ms)"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bench_approve(database_url: str, token: str, call_ids: list[str]) -> str:
    import httpx

    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DEBUG": "0",
        "DJANGO_SETTINGS_MODULE": "bench.pending_settings",
        # Not persistent under ASGI (Django's documentation says so): each request's synchronous
        # part runs in a thread of its own, and a connection kept past the request outlives the
        # thread until it is collected. With 50 deciders, PostgreSQL's 100 slots ran out.
        "CONN_MAX_AGE": "0",
    }
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "daphne",
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "config.asgi:application",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{base}/agent/approvals/pending", timeout=1)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "daphne did not start"
                time.sleep(0.1)
        slices = [call_ids[i::DECIDERS] for i in range(DECIDERS)]
        samples: list[float] = []
        errors: list[int] = []
        lock = threading.Lock()
        barrier = threading.Barrier(DECIDERS)

        def decider(ids: list[str]) -> None:
            headers = {"Authorization": f"Token {token}"}
            with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
                barrier.wait()
                for call_id in ids:
                    started = time.perf_counter()
                    response = client.post(
                        "/agent/tool-call/approve", json={"tool_call_id": call_id}
                    )
                    elapsed = time.perf_counter() - started
                    with lock:
                        samples.append(elapsed)
                        if response.status_code != 200:
                            errors.append(response.status_code)

        threads = [threading.Thread(target=decider, args=(s,)) for s in slices]
        started = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - started
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert not errors, f"non-200 answers: {errors[:5]}"
    median, p99 = percentiles(samples)
    return (
        f"| {len(samples):,} approvals, {DECIDERS} concurrent deciders | {median:.1f} | {p99:.1f} "
        f"| {len(samples) / wall:.0f} /s |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reuse", action="store_true", help="keep data already loaded")
    parser.add_argument("--requests", type=int, default=200, help="requests per measurement")
    parser.add_argument(
        "--no-approve", action="store_true", help="the inbox only (the data stays as loaded)"
    )
    args = parser.parse_args()
    database_url = bench_database_url("_bench")
    setup_django(database_url)
    from django.contrib.auth.models import Group, User
    from rest_framework.authtoken.models import Token

    from agent_core.actors import actor_for_user
    from agent_core.choices import CallStatus
    from agent_core.models import ToolCall

    fran, _ = User.objects.get_or_create(username="bench-fran")
    fran.groups.add(Group.objects.get_or_create(name="finance")[0])
    alice, _ = User.objects.get_or_create(username="bench-alice")
    token, _ = Token.objects.get_or_create(user=fran)
    load(f"user:{alice.pk}", reuse=args.reuse)
    pending = ToolCall.objects.filter(status=CallStatus.PENDING_APPROVAL)
    print(f"{ToolCall.objects.count():,} calls, {pending.count():,} pending")
    lines = bench_pending({"finance approver": fran, "requester": alice}, args.requests)
    print("\n| inbox of | page | median ms | p99 ms | SQL ms | partial index | first page p99 |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(lines))
    print("\nThe requester's first page's keys, EXPLAIN ANALYZE:\n")
    print(explain_keys(actor_for_user(alice)))
    if args.no_approve:
        return
    targets = list(
        pending.filter(approver="finance", position=0).order_by("id").values_list("id", flat=True)
    )[:APPROVALS]
    approve = bench_approve(database_url, token.key, targets)
    print("\n| approve endpoint | median ms | p99 ms | throughput |")
    print("|---|---|---|---|")
    print(approve)
    print("\n(after the approve run the data has changed: run without --reuse to measure again)")


if __name__ == "__main__":
    main()
