"""What the audit hash chain's head row lock costs concurrent decisions (bench/README.md,
"The audit chain's head lock").

    DATABASE_URL=postgres://…/airlock_gov_bench PYTHONPATH=. python bench/audit_chain.py \\
        [--deciders 1,4,16,32] [--decisions 2000]

against a scratch database with the calls ``bench/simulate_calls.sql`` loads (it writes decision
attempts and bumps those calls' ``attempts``). Each decider is a thread with its own connection
and its own calls; each decision is the database part of the decision path, one transaction:
lock the call (``SELECT … FOR UPDATE``), append the attempt (``approvals.sql.AUDIT_ATTEMPT``: the
table's trigger advances the chain's head under its row lock), write the call (the
compare-and-set), commit. The head row stays locked from the append to the commit, so appends
queue behind each other's commits (``fsync`` included).

Run twice per number of deciders: with the chain, and without it (the trigger disabled for the
run, then enabled again): decisions/s, p50 / p99 per decision, and how many backends waited on a
lock (``pg_stat_activity.wait_event_type = 'Lock'``, sampled every 5 ms).
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from datetime import UTC, datetime

import django
import psycopg

TRIGGER = "approvals_chain_attempt"


def run(url: str, deciders: int, decisions: int, statement: str) -> dict[str, float]:
    per = decisions // deciders
    barrier = threading.Barrier(deciders + 1)
    latencies: list[float] = []
    lock = threading.Lock()

    def decider(i: int) -> None:
        took = []
        with psycopg.connect(url) as conn:
            barrier.wait()
            for k in range(per):
                call = f"tc_b{1 + i + k * deciders}"
                start = time.perf_counter()
                with conn.transaction(), conn.cursor() as cur:
                    cur.execute(
                        "SELECT run_id, thread_id, tool_name FROM agent_core_toolcall"
                        " WHERE id = %s FOR UPDATE",
                        [call],
                    )
                    run_id, thread_id, tool = cur.fetchone() or ("", "", "")
                    cur.execute(
                        statement,
                        {
                            "tool_call_id": call,
                            "run_id": run_id,
                            "thread_id": thread_id,
                            "tool_name": tool,
                            "action": "approve",
                            "actor_ref": "user:bench",
                            "via": "api",
                            "outcome": "applied",
                            "detail": "",
                            "created_at": datetime.now(UTC),
                            "card_digest": "c" * 64,
                            "policy_digest": "p" * 64,
                            "args_digest": "a" * 64,
                        },
                    )
                    cur.execute(
                        "UPDATE agent_core_toolcall SET attempts = attempts + 1 WHERE id = %s",
                        [call],
                    )
                took.append(time.perf_counter() - start)
        with lock:
            latencies.extend(took)

    waiting: list[int] = []
    stop = threading.Event()

    def sampler() -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            while not stop.is_set():
                row = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                    " AND wait_event_type = 'Lock'"
                ).fetchone()
                waiting.append(row[0] if row else 0)
                time.sleep(0.005)

    threads = [threading.Thread(target=decider, args=(i,)) for i in range(deciders)]
    for t in threads:
        t.start()
    watcher = threading.Thread(target=sampler)
    watcher.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    stop.set()
    watcher.join()
    ordered = sorted(latencies)
    return {
        "rate": len(latencies) / wall,
        "p50": statistics.median(ordered) * 1000,
        "p99": ordered[int(len(ordered) * 0.99) - 1] * 1000,
        "waiting": statistics.mean(waiting) if waiting else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--deciders", default="1,4,16,32")
    parser.add_argument("--decisions", type=int, default=2000, help="per run")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.dev")
    django.setup()
    from django.db import connection

    from approvals import sql

    url = os.environ["DATABASE_URL"]
    table = "approvals_decisionattempt"
    print("deciders | chain | decisions/s | p50 ms | p99 ms | backends waiting on a lock (mean)")
    with psycopg.connect(url, autocommit=True) as admin:
        try:
            for n in (int(x) for x in args.deciders.split(",")):
                for chained in (True, False):
                    state = "ENABLE" if chained else "DISABLE"
                    admin.execute(f"ALTER TABLE {table} {state} TRIGGER {TRIGGER}")
                    r = run(url, n, args.decisions, sql.AUDIT_ATTEMPT)
                    print(
                        f"{n} | {'on' if chained else 'off'} | {r['rate']:.0f} | {r['p50']:.2f}"
                        f" | {r['p99']:.2f} | {r['waiting']:.2f}"
                    )
        finally:
            admin.execute(f"ALTER TABLE {table} ENABLE TRIGGER {TRIGGER}")
    connection.close()


if __name__ == "__main__":
    main()
