"""The approval-cycle benchmark (issue 3): inline and durable runner against the commit floor.

One cycle: start a run whose model calls a read tool, then an action tool → waiting → approve
over the service API → the tool runs → final answer → completed (scripted model, zero latency).
A delegated cycle: the run hands that cycle to a child run (``ask_bench``) and answers with its
answer; the child's action call is the one approved.

Usage (PostgreSQL and Redis from DATABASE_URL / REDIS_URL; ``make bench`` starts private ones):

    .venv/bin/python bench/approval_cycle.py [--cycles 50] [--batch 80]

It migrates the database it is pointed at, starts its own Celery worker for the durable runner,
and prints a Markdown table (the one in bench/README.md).
"""

from __future__ import annotations

import argparse
import itertools
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import DatabaseError, close_old_connections, connection, transaction  # noqa: E402

from agent_core.actors import Actor  # noqa: E402
from agent_core.choices import RunStatus  # noqa: E402
from agent_core.engine import runs  # noqa: E402
from agent_core.engine.dispatch import Runner, set_runner  # noqa: E402
from agent_core.models import Run, StreamFrame, ToolCall  # noqa: E402
from agent_core.runner.durable import DurableRunner  # noqa: E402
from agent_core.runner.inline import InlineRunner  # noqa: E402
from approvals import services as port  # noqa: E402
from bench import follow, hops, statement_floor  # noqa: E402
from bench.cycle_report import Result, against_targets, report  # noqa: E402
from bench.follow import News  # noqa: E402
from demo.models import Order  # noqa: E402

ACTOR = Actor(ref="user:bench")
# Tables a cycle writes to: their live rows and bytes are counted per cycle.
TABLES = [
    "agent_core_thread",
    "agent_core_run",
    "agent_core_message",
    "agent_core_toolcall",
    "agent_core_step",
    "agent_core_streamframe",
    "approvals_decisionattempt",
    "demo_refund",
]


@dataclass
class Polls:
    """Status reads the benchmark itself makes (each an autocommit transaction): subtracted.
    ``reading`` marks them while they run (``active``), for ``bench/sql_floor.py``."""

    count: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    local: threading.local = field(default_factory=threading.local)

    def add(self, n: int) -> None:
        with self.lock:
            self.count += n

    @contextmanager
    def reading(self) -> Iterator[None]:
        self.local.on = True
        try:
            yield
        finally:
            self.local.on = False

    def active(self) -> bool:
        """Whether this thread is making one of the benchmark's own reads."""
        return getattr(self.local, "on", False)


POLLS = Polls()


# The frame that commits with each status a cycle waits for.
ANNOUNCED_BY: dict[str, str] = {
    RunStatus.WAITING: "approval-requested",
    RunStatus.COMPLETED: "finish",
}


def wait_status(run_id: str, wanted: str, news: News) -> float:
    """Wait until the worker has taken the run to ``wanted``; return when it got there (wall
    clock, from the row the worker wrote: the parking step's last frame, or ``finished_at``).

    The run's row is read at once and again when the run's live stream (``news``, from
    ``bench.follow``) brings the frame that commits with ``wanted``, not on a timer: the
    benchmark leaves the CPUs to the worker. The time comes from the database, not from when
    this thread woke: the end of an interval is the worker's timestamp taken just before its
    last commit.
    """
    reads = 0
    while True:
        reads += 1
        with POLLS.reading():
            status, finished_at = (
                Run.objects.values_list("status", "finished_at").filter(pk=run_id).get()
            )
        if status == wanted:
            break
        if status in (RunStatus.FAILED, RunStatus.CANCELLED):
            raise RuntimeError(f"{run_id} {status}")
        news.wait(ANNOUNCED_BY[wanted])
    if finished_at is None:
        reads += 1
        with POLLS.reading():
            finished_at = StreamFrame.objects.filter(run_id=run_id).latest("seq").created_at
    POLLS.add(reads)
    return float(finished_at.timestamp())


def child_of(run_id: str, news: News | None) -> str:
    """The child run a delegated cycle's parent started: at once when the run is driven here
    (``news`` None), else when a worker started it (the child's frames are mirrored into the
    parent's stream)."""
    reads = 0
    while True:
        reads += 1
        with POLLS.reading():
            found = Run.objects.filter(parent_run_id=run_id).values_list("pk", flat=True).first()
        if found is not None:
            POLLS.add(reads)
            return found
        if news is None:
            raise RuntimeError(f"{run_id} started no child")
        news.wait("delegated")


def cycle(synchronous: bool, delegated: bool = False) -> tuple[float, float]:
    """One approval cycle; returns (start→waiting, approve→completed) in seconds. ``delegated``:
    the run hands the cycle to a child run, whose action call is approved."""
    t0 = time.time()
    run = start("bench_parent" if delegated else "bench")
    if synchronous:  # driven in this thread: parked when start_run returns, done when approve does
        t1 = time.time()
        t2 = approve(child_of(run.pk, None) if delegated else run.pk)
        t3 = time.time()
        with POLLS.reading():
            status = Run.objects.values_list("status", flat=True).get(pk=run.pk)
        POLLS.add(1)
        assert status == RunStatus.COMPLETED, status
        return t1 - t0, t3 - t2
    with follow.following(run.pk) as news:
        parked = child_of(run.pk, news) if delegated else run.pk
        t1 = wait_status(parked, RunStatus.WAITING, news)
        t2 = approve(parked)
        t3 = wait_status(run.pk, RunStatus.COMPLETED, news)
    return t1 - t0, t3 - t2


# Orders the cycles refund, one after another (``prepare_database`` makes them): an order of one's
# own, as in a shop. When every cycle refunded one order, ``lookup_order``'s sum of its refunds
# read every refund the database had ever stored, and a cycle cost more the older the database
# (0.86 ms of PostgreSQL at 2,700 refunds, 0.03 to 0.06 ms with a few).
ORDERS = 10_000
_orders = itertools.count()


def start(agent: str) -> Run:
    """Start the cycle's run of ``agent``, about the next order of the pool."""
    order = f"B-{next(_orders) % ORDERS + 1}"
    return runs.start_run(agent=agent, message=f"Refund {order}", actor=ACTOR)


def approve(parked: str) -> float:
    """Approve the parked run's pending call over the service API; returns when it started."""
    with POLLS.reading():
        call_id = ToolCall.objects.values_list("pk", flat=True).get(
            run_id=parked, status="pending_approval"
        )
    POLLS.add(1)
    started = time.time()
    port.approve(call_id, actor=ACTOR)
    return started


def xact_commit() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        )
        row = cursor.fetchone()
    assert row is not None
    return int(row[0])


def table_totals() -> tuple[int, int]:
    rows = size = 0
    with connection.cursor() as cursor:
        for table in TABLES:
            cursor.execute(f"SELECT count(*), coalesce(sum(pg_column_size(t.*)), 0) FROM {table} t")
            n, b = cursor.fetchone() or (0, 0)
            rows, size = rows + int(n), size + int(b)
    return rows, size


def settle_stats() -> int:
    """The database's commit counter once every backend has reported: a busy backend reports at
    most once a second, an idle one (a worker's kept connection) within ten."""
    connection.close()
    time.sleep(11)
    value = xact_commit()
    connection.close()
    return value


def wal_position() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_lsn()::text")
        row = cursor.fetchone()
    assert row is not None
    return str(row[0])


def commit_records(start: str, end: str) -> int | None:
    """The commit records written to the WAL between two positions: one per transaction that
    wrote (a read-only one writes none), whatever process ran it. ``None`` without the
    ``pg_walinspect`` extension (PostgreSQL 15+, a superuser creates it)."""
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
            cursor.execute(
                "SELECT count FROM pg_get_wal_stats(%s, %s, true)"
                ' WHERE "resource_manager/record_type" = %s',
                [start, end, "Transaction/COMMIT"],
            )
            row = cursor.fetchone()
    except DatabaseError:
        return None
    return 0 if row is None else int(row[0])


def measure(
    name: str, runner: Runner, synchronous: bool, cycles: int, batch: int, delegated: bool = False
) -> Result:
    set_runner(runner)
    for _ in range(5):
        cycle(synchronous, delegated)  # warm up: imports, plans, connections
    # Commits, write transactions, rows and bytes over a sequential batch.
    POLLS.count = 0
    statements = 0
    before_commits = settle_stats()
    before_wal = wal_position()
    before_rows, before_bytes = table_totals()
    waits, dones, floors, statement_floors = [], [], [], []
    floor_commits = floor_writes = 0  # the statement floor's own transactions
    for _ in range(cycles):
        polled = POLLS.count
        with statement_floor.recording(statement_floor.Shape()) as shape:
            w, d = cycle(synchronous, delegated)
        statements += shape.statements
        waits.append(w)
        dones.append(d)
        floors.append(floor_sample())
        if synchronous:  # the statements are this thread's: the same round trips, empty
            shape.reads -= POLLS.count - polled  # the benchmark's own status reads
            t0 = time.perf_counter()
            statement_floor.replay(shape)
            statement_floors.append(time.perf_counter() - t0)
            floor_commits += shape.reads + shape.writes + len(shape.transactions)
            floor_writes += shape.writes + len(shape.transactions)
    after_rows, after_bytes = table_totals()
    after_wal = wal_position()
    # The benchmark's own transactions: status reads, table totals, WAL positions, floor samples
    # (the only ones that write), the first commit-counter read.
    polls = POLLS.count + 2 * len(TABLES) + 2 + FLOOR_TRANSACTIONS * cycles + floor_commits + 1
    after_commits = settle_stats()
    result = Result(name, waits, dones, floor=statistics.median(floors))
    if statement_floors:
        result.statement_floor = statistics.median(statement_floors)
        result.round_trips = shape.round_trips  # the last cycle's
    result.commits = (after_commits - before_commits - polls) / cycles
    written = commit_records(before_wal, after_wal)
    if written is not None:
        result.writes = (written - FLOOR_TRANSACTIONS * cycles - floor_writes) / cycles
    result.rows = (after_rows - before_rows) / cycles
    result.bytes = (after_bytes - before_bytes) / cycles
    if synchronous:
        result.statements = (statements - POLLS.count) / cycles
    result.rate1 = cycles / (sum(waits) + sum(dones))
    result.rate8 = throughput(synchronous, batch, 8, delegated)
    return result


def throughput(
    synchronous: bool, batch: int, concurrency: int, delegated: bool, *, warm: int = 2
) -> float:
    """Cycles a second with ``concurrency`` threads taking ``batch`` cycles between them. Each
    thread first takes ``warm`` cycles of its own before the clock starts: its connection is
    new, and the core's statements are prepared on their second run. Cold, with a batch of 40,
    those first cycles were a third of the time (inline: 62 cycles/s against 94 warm)."""
    counter = iter(range(batch))
    lock = threading.Lock()
    warmed = threading.Barrier(concurrency + 1)

    def worker() -> None:
        try:
            for _ in range(warm):
                cycle(synchronous, delegated)
        finally:
            warmed.wait()
        while True:
            with lock:
                if next(counter, None) is None:
                    break
            cycle(synchronous, delegated)
        close_old_connections()
        connection.close()

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    warmed.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    return batch / (time.perf_counter() - start)


FLOOR_TRANSACTIONS = 5


def floor_sample() -> float:
    """The time of 5 committed single-row writes in a row: the least a durable approval cycle can
    cost (start, model step → read call, read result + model step → waiting, decision, tool
    result + answer → completed). Taken between cycles, so it sees the same machine load."""
    payload = '{"kind": "frame", "data": {"text": "a typical row of a cycle"}}'
    t0 = time.perf_counter()
    for _ in range(FLOOR_TRANSACTIONS):
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO bench_floor (d) VALUES (%s)", [payload])
    return time.perf_counter() - t0


@contextmanager
def celery_worker(concurrency: int) -> Iterator[None]:
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="bench.settings", AGENT_RUNNER="durable")
    args = ["-Q", "agent.llm,agent.tool", "-c", str(concurrency), "-l", "warning"]
    args += ["-I", "bench.hops"]  # the empty cycle's task
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", *args, "--without-gossip"],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    try:
        time.sleep(4)  # let the pool come up before the clock starts
        yield
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait()


def prepare_database() -> None:
    """Migrate the database the benchmark is pointed at, and make the cycles' orders."""
    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {Order._meta.db_table} (id, customer_email, total, status)"
            " SELECT 'B-' || n, 'b@example.com', 1000000, 'delivered' FROM generate_series(1, %s) n"
            " ON CONFLICT (id) DO NOTHING",
            [ORDERS],
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=30, help="sequential cycles per runner")
    parser.add_argument("--batch", type=int, default=200, help="cycles of the 8-concurrent run")
    args = parser.parse_args(argv)
    prepare_database()
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE IF NOT EXISTS bench_floor (id bigserial PRIMARY KEY, d jsonb)")
        # Earlier runs' dead rows would slow this one where autovacuum is off (as on the
        # development VM): every run starts from vacuumed, analyzed tables.
        cursor.execute(f"VACUUM ANALYZE {', '.join(TABLES)}")
    try:
        inline = InlineRunner(workers=0)
        results = [measure("inline", inline, True, args.cycles, args.batch)]
        results.append(measure("inline, delegated", inline, True, args.cycles, args.batch, True))
        with celery_worker(8):
            durable = measure("durable", DurableRunner(), False, args.cycles, args.batch)
            durable.empty = statistics.median(hops.empty_cycle() for _ in range(args.cycles))
            results.append(durable)
            delegated = measure(
                "durable, delegated", DurableRunner(), False, args.cycles, args.batch, True
            )
            results.append(delegated)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE bench_floor")
    print(report(results))
    print()
    print(against_targets(results))


if __name__ == "__main__":
    main()
