"""The soak (issue 36): the approval cycle at a steady rate for a while, with random faults of
SPEC §20 that the fault harness can make (PostgreSQL restarted fast or immediate, Redis
restarted empty), and the promises checked at the end.

Usage (it starts its own PostgreSQL and Redis, ``tests.faults.services``, and leaves nothing
behind):

    .venv/bin/python bench/soak.py [--minutes 30] [--rate 2] [--fault-every 30]

The layout is the inline runner's (as in a web process): cycles driven in this process's
threads, the inline runner's sweeper re-driving what a fault cut off, on short leases. It
prints a Markdown table: the invariants (every approved effect once, every acknowledged
decision recorded with its audit row, every run ended or parked), the time to recover from each
kind of fault (from the fault healed to the next whole cycle), cycles a second before, during
and after the faults, and this process's memory and PostgreSQL's connections over time.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.faults.services import Postgres, Redis, start_postgres, start_redis  # noqa: E402

LEASE, SWEEP = 5, 1
CONNECTIONS = "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"


@dataclass
class Log:
    """What the cycles and the faults did, on the monotonic clock."""

    done: list[float] = field(default_factory=list)  # a whole cycle ended
    failed: list[float] = field(default_factory=list)  # a cycle raised (the fault's answer)
    approved: list[str] = field(default_factory=list)  # acknowledged approvals: call ids
    faults: list[tuple[str, float, float]] = field(default_factory=list)  # name, start, healed
    samples: list[tuple[float, int, int]] = field(default_factory=list)  # t, RSS kB, conns
    lock: threading.Lock = field(default_factory=threading.Lock)


def faults(postgres: Postgres, redis: Redis) -> dict[str, Callable[[], None]]:
    return {
        "PostgreSQL restart -m fast": lambda: postgres.restart("fast"),
        "PostgreSQL restart -m immediate": lambda: postgres.restart("immediate"),
        "Redis restarted empty": lambda: redis.restart_empty(down=1),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--rate", type=float, default=2, help="cycles started a second")
    parser.add_argument("--fault-every", type=float, default=30, help="seconds between faults")
    args = parser.parse_args(argv)
    home = Path(tempfile.mkdtemp(prefix="airlock-soak-"))
    postgres = start_postgres(home / "pg")
    redis = start_redis(home)
    try:
        postgres.server.psql("CREATE DATABASE airlock_soak;")
        os.environ["DATABASE_URL"] = postgres.url("airlock_soak")
        os.environ["REDIS_URL"] = redis.url
        soak(args, faults(postgres, redis))
    finally:
        redis.stop()
        postgres.stop()
        shutil.rmtree(home, ignore_errors=True)


def soak(args: argparse.Namespace, injected: dict[str, Callable[[], None]]) -> None:
    # Django is set up on the services above (``bench.approval_cycle`` sets it up on import).
    from bench import approval_cycle as cycle

    cycle.prepare_database()
    from django.conf import settings

    from agent_core.conf import agent_settings
    from agent_core.engine.dispatch import set_runner
    from agent_core.runner.inline import InlineRunner

    settings.AGENT = {**settings.AGENT, "LEASE_SECONDS": LEASE, "SWEEP_SECONDS": SWEEP}
    agent_settings.cache_clear()
    runner = InlineRunner(workers=0)
    set_runner(runner)
    runner.start()
    log = Log()
    end = time.monotonic() + args.minutes * 60
    threads = [threading.Thread(target=_faults, args=(log, injected, end, args.fault_every))]
    threads.append(threading.Thread(target=_sample, args=(log, end)))
    threads += [threading.Thread(target=_cycles, args=(log, end, args.rate / 4)) for _ in range(4)]
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    settled = _settle(began)
    print(_report(log, began, settled, args))
    runner.shutdown()


def _cycles(log: Log, end: float, rate: float) -> None:
    from django.db import close_old_connections

    from bench import approval_cycle as cycle

    while time.monotonic() < end:
        tick = time.monotonic()
        try:
            run = cycle.start("bench")
            call_id = _pending(run.pk)
            cycle.port.approve(call_id, actor=cycle.ACTOR)
            with log.lock:
                log.approved.append(call_id)
                log.done.append(time.monotonic())
        except Exception:  # the fault's answer: a 503 to a client; the cycle is not retried
            close_old_connections()
            with log.lock:
                log.failed.append(time.monotonic())
        time.sleep(max(0.0, 1 / rate - (time.monotonic() - tick)))


def _pending(run_id: str) -> str:
    from agent_core.models import ToolCall

    return str(
        ToolCall.objects.values_list("pk", flat=True).get(run_id=run_id, status="pending_approval")
    )


def _faults(log: Log, injected: dict[str, Callable[[], None]], end: float, every: float) -> None:
    pace = random.Random(36)
    time.sleep(every)
    while time.monotonic() < end - every:
        name = pace.choice(sorted(injected))
        began = time.monotonic()
        injected[name]()
        log.faults.append((name, began, time.monotonic()))
        time.sleep(every)


def _sample(log: Log, end: float) -> None:
    while time.monotonic() < end:
        log.samples.append((time.monotonic(), _rss_kb(), _connections()))
        time.sleep(10)


def _rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _connections() -> int:
    from django.db import DatabaseError, connection

    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = %s", ["client backend"]
            )
            row = cursor.fetchone()
    except DatabaseError:
        connection.close()
        return -1
    return int(row[0]) if row else 0


def _settle(began: float) -> float:
    """Wait (past ``LEASE + SWEEP``, a guard of two minutes) until no run is queued or running;
    the seconds it took after the load stopped."""
    from django.db import close_old_connections

    from agent_core.models import Run

    stopped = time.monotonic()
    while time.monotonic() - stopped < 120:
        try:
            if not Run.objects.filter(status__in=["queued", "running"]).exists():
                break
        except Exception:
            close_old_connections()
        time.sleep(0.5)
    return time.monotonic() - stopped


def _invariants(log: Log) -> list[tuple[str, str]]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FILTER (WHERE n > 1),"
            " count(*) FILTER (WHERE status = 'succeeded' AND n <> 1),"
            " count(*) FILTER (WHERE status <> 'succeeded' AND n > 0)"
            " FROM (SELECT c.status, count(r.id) AS n FROM agent_core_toolcall c"
            " LEFT JOIN demo_refund r ON r.tool_call_id = c.id"
            " WHERE c.kind = 'action' GROUP BY c.id, c.status) calls"
        )
        twice, missing, stray = cursor.fetchone() or (0, 0, 0)
        cursor.execute(
            "SELECT count(*) FROM agent_core_toolcall c WHERE c.id = ANY(%(ids)s)"
            " AND (c.status = 'pending_approval' OR NOT EXISTS (SELECT 1 FROM"
            " approvals_decisionattempt a WHERE a.tool_call_id = c.id AND a.outcome = 'applied'))",
            {"ids": log.approved},
        )
        unrecorded = (cursor.fetchone() or (0,))[0]
        cursor.execute(
            "SELECT status, count(*) FROM agent_core_run GROUP BY status ORDER BY status"
        )
        statuses = ", ".join(f"{status} {n}" for status, n in cursor.fetchall())
    return [
        ("approved effects run twice", str(twice)),
        ("succeeded calls without their effect / failed calls with one", f"{missing} / {stray}"),
        (f"acknowledged approvals ({len(log.approved)}) not in call + audit", str(unrecorded)),
        ("runs by status at the end", statuses),
    ]


def _report(log: Log, began: float, settled: float, args: argparse.Namespace) -> str:
    lines = [
        f"Soak: {args.minutes:g} min, {args.rate:g} cycles/s offered, a fault every"
        f" {args.fault_every:g} s; lease {LEASE} s, sweep {SWEEP} s.",
        "",
        "| invariant | value |",
        "|---|---|",
        *(f"| {name} | {value} |" for name, value in _invariants(log)),
        f"| queued / running runs settled within (after the load) | {settled:.1f} s |",
        "",
        "| fault | times | recover p50 s | recover p99 s |",
        "|---|---|---|---|",
    ]
    for name in sorted({name for name, _, _ in log.faults}):
        times = [_recovered(log, healed) for n, _, healed in log.faults if n == name]
        lines.append(
            f"| {name} | {len(times)} | {statistics.median(times):.1f} | {_p99(times):.1f} |"
        )
    first = log.faults[0][1] if log.faults else time.monotonic()
    last = log.faults[-1][2] if log.faults else first
    stop = began + args.minutes * 60
    lines += [
        "",
        "| phase | seconds | whole cycles/s | failed cycles |",
        "|---|---|---|---|",
        _phase(log, "before the first fault", began, first),
        _phase(log, "while faults come", first, last),
        _phase(log, "after the last fault", last, stop),
        "",
        "| minute | RSS MB | PostgreSQL client connections |",
        "|---|---|---|",
    ]
    for t, rss, conns in log.samples[:: max(1, len(log.samples) // 10)]:
        shown = "down" if conns < 0 else str(conns)
        lines.append(f"| {(t - began) / 60:.1f} | {rss / 1024:.0f} | {shown} |")
    return "\n".join(lines)


def _recovered(log: Log, healed: float) -> float:
    after = [t for t in log.done if t >= healed]
    return (min(after) if after else float("inf")) - healed


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def _phase(log: Log, name: str, start: float, stop: float) -> str:
    seconds = max(stop - start, 1e-9)
    done = sum(start <= t < stop for t in log.done)
    failed = sum(start <= t < stop for t in log.failed)
    return f"| {name} | {seconds:.0f} | {done / seconds:.2f} | {failed} |"


if __name__ == "__main__":
    main()
