"""The CPU a durable approval cycle costs, by process, with 8 cycles in flight (issue 18): where
the two cores go once the durable runner saturates them.

With the benchmark's Celery worker (``-c 8``, prefork, both queues) and ``DurableRunner`` in this
process, ``--batch`` cycles run 8 at a time (``approval_cycle.throughput``); every process's CPU
time (user + system, from ``/proc``: ``bench.proc``) is read before and after, and divided by the
cycles: this process (the benchmark's starts, approvals, status reads and stream following), the
worker's parent (it receives and acknowledges the tasks), its pool's children (the steps),
PostgreSQL's processes, Redis, and the rest of the machine.

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/durable_cpu.py [--batch 80]

It migrates the database it is pointed at (as ``approval_cycle.py`` does).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"

import django

django.setup()

from agent_core.engine.dispatch import set_runner  # noqa: E402
from agent_core.runner.durable import DurableRunner  # noqa: E402
from bench.approval_cycle import celery_worker, prepare_database, throughput  # noqa: E402
from bench.proc import busy_seconds, processes  # noqa: E402

KINDS = ["benchmark", "worker parent", "worker children", "postgres", "redis", "other"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=80)
    args = parser.parse_args()
    prepare_database()
    with celery_worker(8):
        set_runner(DurableRunner())
        throughput(False, 16, 8, False)  # the pool's children connect and warm up
        before, machine = cpu_by_process(), busy_seconds()
        start = time.perf_counter()
        rate = throughput(False, args.batch, 8, False, warm=0)  # every cycle's CPU counted
        elapsed = time.perf_counter() - start
        after, busy = cpu_by_process(), busy_seconds() - machine
    spent: dict[str, float] = dict.fromkeys(KINDS, 0.0)
    for pid, (kind, seconds) in after.items():
        spent[kind] += seconds - before.get(pid, (kind, 0.0))[1]
    print(f"{rate:.1f} cycles/s, 8 in flight; the machine busy {busy / elapsed * 100:.0f} %")
    print("| process | CPU ms / cycle | share |")
    print("|---|---|---|")
    total = sum(spent.values())
    for kind in KINDS:
        print(f"| {kind} | {spent[kind] / args.batch * 1000:.1f} | {spent[kind] / total:.0%} |")
    print(f"| all | {total / args.batch * 1000:.1f} | 100% |")


def cpu_by_process() -> dict[int, tuple[str, float]]:
    """Every process's kind and CPU seconds so far."""
    me = os.getpid()
    found = {}
    for process in processes().values():
        if process.pid == me:
            kind = "benchmark"
        elif "celery" in process.command and "worker" in process.command:
            kind = "worker parent" if process.ppid == me else "worker children"
        elif process.name.startswith("postgres"):
            kind = "postgres"
        elif process.name.startswith("redis"):
            kind = "redis"
        else:
            kind = "other"
        found[process.pid] = kind, process.cpu
    return found


if __name__ == "__main__":
    main()
