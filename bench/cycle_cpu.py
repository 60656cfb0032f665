"""The process CPU of an inline approval cycle (issue 18, item 2), and optionally its profile.

The benchmark's ``cycle`` (inline runner, same thread) timed with ``time.process_time()``:
``--rounds`` rounds of ``--cycles`` after ``--warm`` cycles to warm up; prints each round's CPU
per cycle and their median, then the same for the cycle's statement floor (its round trips with
trivial statements, ``bench.statement_floor``): the CPU the driver and Django's cursor spend on
that many round trips, before any of our Python. ``--profile N``: prints cProfile's top N
entries (by own time) of one more round instead.

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/cycle_cpu.py [--profile 30]

It migrates the database it is pointed at (as ``approval_cycle.py`` does).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"

import django

django.setup()

from django.db import connection  # noqa: E402

from agent_core.engine.dispatch import set_runner  # noqa: E402
from agent_core.runner.inline import InlineRunner  # noqa: E402
from bench import statement_floor  # noqa: E402
from bench.approval_cycle import POLLS, cycle, prepare_database  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warm", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cycles", type=int, default=40)
    parser.add_argument("--profile", type=int, default=0, help="top entries of a profiled round")
    args = parser.parse_args()
    prepare_database()
    set_runner(InlineRunner(workers=0))
    for _ in range(args.warm):
        cycle(True)
    if args.profile:
        profile = cProfile.Profile(time.process_time)  # CPU, not waits
        profile.enable()
        for _ in range(args.cycles):
            cycle(True)
        profile.disable()
        pstats.Stats(profile).sort_stats("tottime").print_stats(args.profile)
        return
    polled = POLLS.count
    with statement_floor.recording(statement_floor.Shape()) as shape:
        cycle(True)
    shape.reads -= POLLS.count - polled  # the benchmark's own status reads
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE IF NOT EXISTS bench_floor (id bigserial PRIMARY KEY, d jsonb)")
    try:
        for name, one in [
            ("cycle", lambda: cycle(True)),
            (
                f"statement floor ({shape.round_trips} round trips)",
                lambda: statement_floor.replay(shape),
            ),
        ]:
            rounds = []
            for _ in range(args.rounds):
                start = time.process_time()
                for _ in range(args.cycles):
                    one()
                rounds.append((time.process_time() - start) / args.cycles * 1000)
            print(
                name,
                " ".join(f"{r:.2f}" for r in rounds),
                f"median {statistics.median(rounds):.2f} ms",
            )
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE bench_floor")


if __name__ == "__main__":
    main()
