"""The SQL floor of the approval cycle (issue 18): the cycle's own statements, replayed with
nothing between them.

``statement_floor`` sends a cycle's round trips with trivial statements. This sends the statements
themselves, as the cycle sent them (``statement_floor.recording``: the same text, parameters,
binding and transactions), on a copy of the benchmark's database taken before the cycles ran,
through one bare psycopg connection made with Django's parameters. Replayed in the order they were
recorded, they find the rows they found the first time and write what they wrote. What that costs
is PostgreSQL's work, the round trips and the least a Python driver does: the floor of a cycle made
of these statements, whatever runs between them. The cycle over its SQL floor is what our Python,
Django's and psycopg's wrappers add; the SQL floor over the floor of five commits is what the
statements cost by themselves.

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/sql_floor.py [--durable] [--cycles 30]

``--durable``: the durable runner's cycle, its tasks driven one after another in this process
(``bench.in_process``): its statements, without the broker's hops (``approval_cycle.py`` measures
those: its empty tasks).

It migrates the database it is pointed at (as ``approval_cycle.py`` does), and makes and drops a
copy of it (``<name>_sqlfloor``): no other session may use the database while it is copied.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"

import django

django.setup()

import psycopg  # noqa: E402
from django.db import connection  # noqa: E402

from agent_core.engine.dispatch import set_runner  # noqa: E402
from agent_core.runner.inline import InlineRunner  # noqa: E402
from bench.approval_cycle import (  # noqa: E402
    POLLS,
    TABLES,
    cycle,
    floor_sample,
    prepare_database,
    throughput,
)
from bench.in_process import InProcessDurable  # noqa: E402
from bench.statement_floor import Sent, Shape, recording, replay  # noqa: E402

WARM = 5  # recorded cycles replayed first, untimed: the copy's connection prepares on them


@dataclass
class Found:
    """p50 seconds of the floor and of each measure, CPU seconds a cycle, cycles/s 8 in flight."""

    floor: float
    p50: dict[str, float]
    cpu: dict[str, float]
    rate8: float | None
    sql_rate8: float


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warm", type=int, default=10, help="cycles before the copy")
    parser.add_argument("--cycles", type=int, default=30, help="sequential cycles, timed")
    parser.add_argument("--batch", type=int, default=200, help="cycles of the 8-concurrent runs")
    parser.add_argument("--durable", action="store_true", help="the durable runner's cycle")
    args = parser.parse_args()
    prepare_database()
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE IF NOT EXISTS bench_floor (id bigserial PRIMARY KEY, d jsonb)")
        cursor.execute(f"VACUUM ANALYZE {', '.join(TABLES)}")
    one = _durable_cycle(InProcessDurable()) if args.durable else _inline_cycle()
    for _ in range(args.warm):
        one()
    copy = copy_database()
    try:
        found = measure(copy, one, args.cycles, args.batch, inline=not args.durable)
    finally:
        with admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{copy}"')
    report(found, "the durable cycle, its tasks in process" if args.durable else "the inline cycle")


def _inline_cycle() -> Callable[[], float]:
    set_runner(InlineRunner(workers=0))

    def one() -> float:
        waiting, completed = cycle(True)
        return waiting + completed

    return one


def _durable_cycle(runner: InProcessDurable) -> Callable[[], float]:
    set_runner(runner)

    def one() -> float:  # the whole cycle: approve's read of the pending call included
        t0 = time.perf_counter()
        runner.cycle()
        return time.perf_counter() - t0

    return one


def measure(copy: str, one: Callable[[], float], cycles: int, batch: int, *, inline: bool) -> Found:
    """Record ``WARM + cycles + batch`` cycles here (``cycles`` of them timed, each followed by
    a floor sample, its round trips replayed with trivial statements); replay them on ``copy``:
    ``WARM`` to warm up, ``cycles`` timed one after another, ``batch`` by 8 threads."""
    began = time.time()
    recorded: list[list[Sent]] = []
    shapes: list[Shape] = []
    timed: dict[str, list[float]] = {"cycle": [], "sql": [], "statements": []}
    cpu = dict.fromkeys(timed, 0.0)
    floors = []
    for n in range(WARM + cycles + batch):
        polled, c0 = POLLS.count, time.process_time()
        with recording(Shape(), POLLS.active) as shape:
            took = one()
        spent = time.process_time() - c0
        # The benchmark's own reads (the pending call, the status), marked while they run.
        sent = [s for s in shape.sent if not s.poll]
        assert len(shape.sent) - len(sent) == POLLS.count - polled, "a poll not marked"
        recorded.append(sent)
        if WARM <= n < WARM + cycles:
            timed["cycle"].append(took)
            cpu["cycle"] += spent
            floors.append(floor_sample())
            shape.reads -= POLLS.count - polled
            shapes.append(shape)
    ended = time.time()
    for shape in shapes:  # the round trips, with trivial statements (``statement_floor``)
        c0, t0 = time.process_time(), time.perf_counter()
        replay(shape)
        timed["statements"].append(time.perf_counter() - t0)
        cpu["statements"] += time.process_time() - c0
    rate8 = throughput(True, batch, 8, False) if inline else None
    with replaying(copy) as conn:
        prewarm(conn)
        for sent in recorded[:WARM]:
            send(conn, sent)
        for sent in recorded[WARM : WARM + cycles]:
            c0, t0 = time.process_time(), time.perf_counter()
            send(conn, sent)
            timed["sql"].append(time.perf_counter() - t0)
            cpu["sql"] += time.process_time() - c0
    sql_rate8 = replayed_in_parallel(copy, recorded[WARM + cycles :])
    check_replayed(copy, began, ended)
    return Found(
        floor=statistics.median(floors),
        p50={name: statistics.median(times) for name, times in timed.items()},
        cpu={name: spent / cycles for name, spent in cpu.items()},
        rate8=rate8,
        sql_rate8=sql_rate8,
    )


def report(found: Found, cycle_label: str) -> None:
    labels = {
        "cycle": cycle_label,
        "sql": "its statements replayed, nothing between (SQL floor)",
        "statements": "its round trips, trivial statements (statement floor)",
    }
    print("| measure | p50 (ms) | x floor | CPU of this process, ms a cycle |")
    print("|---|---|---|---|")
    print(f"| floor: 5 single-row commits | {found.floor * 1e3:.2f} | 1.0 | n/a |")
    for name, label in labels.items():
        p50 = found.p50[name]
        print(
            f"| {label} | {p50 * 1e3:.2f} | {p50 / found.floor:.1f} | {found.cpu[name] * 1e3:.2f} |"
        )
    rate8 = "n/a" if found.rate8 is None else f"{found.rate8:.1f}"
    print(f"\ncycles/s, 8 in flight: the cycle {rate8}, its SQL floor {found.sql_rate8:.1f}")


def send(conn: psycopg.Connection[Any], sent: list[Sent]) -> None:
    """Send a cycle's statements as it sent them: its transactions begun and committed where
    psycopg began and committed them (each a round trip of its own), every row fetched. Bound on
    the server and prepared, as the core binds them (``rows``: ``replaying`` sets its threshold);
    the connection's own cursors would quote the parameters in (Django's ``cursor_factory``)."""
    cursor = psycopg.Cursor(conn)
    begun = False
    for statement in sent:
        if begun and (statement.alone or statement.begins):
            cursor.execute("COMMIT")
            begun = False
        if statement.begins:
            cursor.execute("BEGIN")
            begun = True
        if statement.many:
            cursor.executemany(statement.sql, statement.params)
            continue
        cursor.execute(statement.sql, statement.params)
        if cursor.description is not None:
            cursor.fetchall()
    if begun:
        cursor.execute("COMMIT")


def replayed_in_parallel(copy: str, cycles: list[list[Sent]]) -> float:
    """Cycles replayed per second by 8 threads, each on a connection of its own."""
    queue = iter(cycles)
    lock = threading.Lock()

    def worker() -> None:
        with replaying(copy) as conn:
            while True:
                with lock:
                    sent = next(queue, None)
                if sent is None:
                    return
                send(conn, sent)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return len(cycles) / (time.perf_counter() - start)


def check_replayed(copy: str, began: float, ended: float) -> None:
    """The recorded cycles' runs ended on the copy as they did here: the replay found what the
    cycles found (a statement that missed its rows would leave its run short of completed)."""
    query = "SELECT id, status FROM agent_core_run WHERE created_at BETWEEN %s AND %s ORDER BY id"
    window = [datetime.fromtimestamp(began, UTC), datetime.fromtimestamp(ended, UTC)]
    with connection.cursor() as cursor:
        cursor.execute(query, window)
        here = cursor.fetchall()
    with replaying(copy) as conn:
        there = conn.execute(query, window).fetchall()
    assert here and [tuple(row) for row in here] == there, "the replay diverged"


@contextmanager
def replaying(copy: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection to the copy with Django's parameters (its adapters), in autocommit (``send``
    sends the ``BEGIN`` and ``COMMIT`` it recorded), preparing statements as the benchmark's
    settings do (``prepare_threshold`` 1): psycopg told to prepare a statement on a connection
    that has no threshold prepares it at every run, planned each time."""
    params = {**connection.get_connection_params(), "dbname": copy}
    with psycopg.connect(**params, autocommit=True) as conn:
        conn.prepare_threshold = 1  # as bench/settings.py prepares
        yield conn


def prewarm(conn: psycopg.Connection[Any]) -> None:
    """Read the copy's tables and indexes into shared buffers, as the original's are: a copy
    has files of its own, none of whose pages the server has read yet. Without the extension
    (the embedded server has none), the warm replays read what they touch: enough while the
    database is smaller than ``shared_buffers``."""
    try:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
    except psycopg.Error as exc:
        print(f"no pg_prewarm ({exc.sqlstate}): the copy is warmed by its first replays only")
        return
    conn.execute(
        "SELECT pg_prewarm(c.oid) FROM pg_class c"
        " WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'i', 't')"
    )


@contextmanager
def admin() -> Iterator[psycopg.Connection[Any]]:
    params = connection.get_connection_params()
    server = {key: params[key] for key in ("host", "port", "user", "password") if key in params}
    with psycopg.connect(**server, dbname="postgres", autocommit=True) as conn:
        yield conn


def copy_database() -> str:
    """A copy of the benchmark's database as it is now: ``CREATE DATABASE … TEMPLATE``."""
    name = connection.settings_dict["NAME"]
    copy = f"{name}_sqlfloor"
    connection.close()  # the template may have no other session
    with admin() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{copy}"')
        conn.execute(f'CREATE DATABASE "{copy}" TEMPLATE "{name}"')
    return copy


if __name__ == "__main__":
    main()
