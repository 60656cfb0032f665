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

The same statements are also replayed in psycopg's pipeline mode, each on a copy of its own: with
each transaction's ``BEGIN``, statements and ``COMMIT`` in one pipeline (one round trip a
transaction: the floor of pipeline mode), and with each transaction's results read before its
``COMMIT`` (two round trips a transaction: the least a pipelined path that checks its
compare-and-set writes' row counts, as ``state.transition`` does, can send).

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/sql_floor.py [--durable] [--cycles 30]

``--durable``: the durable runner's cycle, its tasks driven one after another in this process
(``bench.in_process``): its statements, without the broker's hops (``approval_cycle.py`` measures
those: its empty tasks).

It migrates the database it is pointed at (as ``approval_cycle.py`` does), and makes and drops
copies of it (``<name>_sqlfloor_<replay>``): no other session may use the database while it is
copied.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
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


Send = Callable[[psycopg.Connection[Any], list[Sent]], None]


@dataclass
class Found:
    """p50 seconds of the floor and of each measure, CPU seconds a cycle, round trips a cycle,
    cycles/s 8 in flight (the cycle's, and each replay's)."""

    floor: float
    p50: dict[str, float]
    cpu: dict[str, float]
    round_trips: dict[str, int]
    rate8: float | None
    replay_rate8: dict[str, float]


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
    copies = {name: copy_database(name) for name in REPLAYS}
    try:
        found = measure(copies, one, args.cycles, args.batch, inline=not args.durable)
    finally:
        with admin() as conn:
            for copy in copies.values():
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


def measure(
    copies: dict[str, str], one: Callable[[], float], cycles: int, batch: int, *, inline: bool
) -> Found:
    """Record ``WARM + cycles + batch`` cycles here (``cycles`` of them timed, each followed by
    a floor sample, its round trips replayed with trivial statements); replay them on each of
    ``copies`` (by the name of its replay in ``REPLAYS``): ``WARM`` to warm up, ``cycles`` timed
    one after another (each cycle on every copy in turn), ``batch`` by 8 threads."""
    began = time.time()
    recorded: list[list[Sent]] = []
    shapes: list[Shape] = []
    timed: dict[str, list[float]] = {"cycle": [], **{name: [] for name in REPLAYS}}
    timed["statements"] = []
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
    with ExitStack() as stack:
        conns = {name: stack.enter_context(replaying(copy)) for name, copy in copies.items()}
        for name, conn in conns.items():
            prewarm(conn)
            for sent in recorded[:WARM]:
                REPLAYS[name](conn, sent)
        for n, sent in enumerate(recorded[WARM : WARM + cycles]):
            # Each cycle on every copy in turn, a different copy first each time: a load that
            # drifts weighs on all the replays alike.
            names = list(conns)
            for name in names[n % len(names) :] + names[: n % len(names)]:
                c0, t0 = time.process_time(), time.perf_counter()
                REPLAYS[name](conns[name], sent)
                timed[name].append(time.perf_counter() - t0)
                cpu[name] += time.process_time() - c0
    replay_rate8 = {}
    for name, copy in copies.items():
        replay_rate8[name] = replayed_in_parallel(copy, recorded[WARM + cycles :], REPLAYS[name])
        check_replayed(copy, began, ended)
    sent = recorded[WARM]
    alone = sum(statement.alone for statement in sent)
    begun = sum(statement.begins for statement in sent)
    return Found(
        floor=statistics.median(floors),
        p50={name: statistics.median(times) for name, times in timed.items()},
        cpu={name: spent / cycles for name, spent in cpu.items()},
        round_trips={
            "cycle": shapes[0].round_trips,
            "sql": shapes[0].round_trips,
            "pipelined": alone + begun,
            "checked": alone + 2 * begun,
            "statements": shapes[0].round_trips,
        },
        rate8=rate8,
        replay_rate8=replay_rate8,
    )


def report(found: Found, cycle_label: str) -> None:
    labels = {
        "cycle": cycle_label,
        "sql": "its statements replayed, nothing between (SQL floor)",
        "pipelined": "the same, a pipeline a transaction (pipelined SQL floor)",
        "checked": "the same, results read before each COMMIT (checked pipeline)",
        "statements": "its round trips, trivial statements (statement floor)",
    }
    print(
        "| measure | round trips | p50 (ms) | x floor | x cycle | CPU of this process, ms a cycle |"
    )
    print("|---|---|---|---|---|---|")
    print(f"| floor: 5 single-row commits | 5 | {found.floor * 1e3:.2f} | 1.0 | n/a | n/a |")
    for name, label in labels.items():
        p50, cycle = found.p50[name], found.p50["cycle"]
        print(
            f"| {label} | {found.round_trips[name]} | {p50 * 1e3:.2f} | {p50 / found.floor:.1f}"
            f" | {p50 / cycle:.2f} | {found.cpu[name] * 1e3:.2f} |"
        )
    rate8 = "n/a" if found.rate8 is None else f"{found.rate8:.1f}"
    short = {"sql": "SQL floor", "pipelined": "pipelined SQL floor", "checked": "checked pipeline"}
    replays = ", ".join(f"{short[name]} {rate:.1f}" for name, rate in found.replay_rate8.items())
    print(f"\ncycles/s, 8 in flight: the cycle {rate8}, {replays}")


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


def send_pipelined(conn: psycopg.Connection[Any], sent: list[Sent]) -> None:
    """Send a cycle's statements as ``send`` does, but each transaction's ``BEGIN``, statements
    and ``COMMIT`` in one pipeline: one round trip a transaction, its rows fetched after."""
    for statements in transactions(sent):
        with conn.pipeline():  # its end syncs: the round trip
            cursors = enqueue(conn, statements)
            if not statements[0].alone:
                conn.execute("COMMIT")
        fetched(cursors)


def send_checked(conn: psycopg.Connection[Any], sent: list[Sent]) -> None:
    """``send_pipelined``, but each transaction's results read before its ``COMMIT`` is sent, as
    a pipelined path must to check a compare-and-set write's row count (psycopg sets
    ``rowcount`` only once the pipeline is synced): two round trips a transaction."""
    for statements in transactions(sent):
        with conn.pipeline() as pipeline:
            cursors = enqueue(conn, statements)
            pipeline.sync()
            assert min(fetched(cursors)) >= 0, "a row count the sync did not set"
            if not statements[0].alone:
                conn.execute("COMMIT")


def transactions(sent: list[Sent]) -> Iterator[list[Sent]]:
    """A cycle's statements by transaction: each autocommitted one alone, else those from the
    one that began a transaction to the next that begins one or stands alone."""
    group: list[Sent] = []
    for statement in sent:
        if group and (statement.alone or statement.begins):
            yield group
            group = []
        group.append(statement)
    if group:
        yield group


def enqueue(conn: psycopg.Connection[Any], statements: list[Sent]) -> list[psycopg.Cursor[Any]]:
    """Queue one transaction's statements in the connection's pipeline, ``BEGIN`` first unless it
    is one autocommitted statement; a cursor each (a cursor keeps its last statement's result)."""
    if not statements[0].alone:
        conn.execute("BEGIN")
    cursors = []
    for statement in statements:
        cursor = psycopg.Cursor(conn)
        if statement.many:
            cursor.executemany(statement.sql, statement.params)
        else:
            cursor.execute(statement.sql, statement.params)
        cursors.append(cursor)
    return cursors


def fetched(cursors: list[psycopg.Cursor[Any]]) -> list[int]:
    """Each statement's row count, its rows read as the cycle reads them."""
    for cursor in cursors:
        if cursor.description is not None:
            cursor.fetchall()
    return [cursor.rowcount for cursor in cursors]


# How each replay sends a cycle's statements, by the name of its row in ``report``.
REPLAYS: dict[str, Send] = {"sql": send, "pipelined": send_pipelined, "checked": send_checked}


def replayed_in_parallel(copy: str, cycles: list[list[Sent]], send_one: Send) -> float:
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
                send_one(conn, sent)

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


def copy_database(replay: str) -> str:
    """A copy of the benchmark's database as it is now, for ``replay``: ``CREATE DATABASE …
    TEMPLATE``."""
    name = connection.settings_dict["NAME"]
    copy = f"{name}_sqlfloor_{replay}"
    connection.close()  # the template may have no other session
    with admin() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{copy}"')
        conn.execute(f'CREATE DATABASE "{copy}" TEMPLATE "{name}"')
    return copy


if __name__ == "__main__":
    main()
