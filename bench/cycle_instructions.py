"""Instructions per inline approval cycle, counted by valgrind's callgrind (issue 18, item 2): the
driver's CPU where timings are too noisy to compare (on a shared machine the medians of
``bench/cycle_cpu.py`` for the same code move by ±15 % from one minute to the next).

``--durable``: the durable runner's cycle instead, its tasks driven one after another in this
process (``DurableRunner.drive``, with the enqueued tasks kept in a list, not sent to a broker):
the runner's own work (leases, heartbeat, hand-offs), Celery's excluded.

The benchmark's ``cycle`` (inline runner, same thread; the broadcast thread's sends included) runs
under ``valgrind --tool=callgrind`` twice: ``--warm`` cycles, then ``--warm`` + ``--cycles``. The
difference of the two totals over ``--cycles`` is one cycle's instructions in this process,
start-up excluded. They are instructions, not time: the same for the same code and inputs
whatever else the machine runs. PostgreSQL's and Redis's own work is not in them.

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/cycle_instructions.py [--rounds 2]

It migrates the database it is pointed at (as ``approval_cycle.py`` does). Needs valgrind
(Debian's ``valgrind``); about a minute a round.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"

import django

django.setup()

from agent_core.engine import broadcast  # noqa: E402
from agent_core.engine.dispatch import set_runner  # noqa: E402
from agent_core.runner.inline import InlineRunner  # noqa: E402
from bench import callgrind  # noqa: E402
from bench.approval_cycle import cycle, prepare_database  # noqa: E402
from bench.in_process import InProcessDurable  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warm", type=int, default=5)
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--durable", action="store_true", help="the durable runner's cycle")
    parser.add_argument("--run", type=int, help=argparse.SUPPRESS)  # under valgrind: N cycles
    args = parser.parse_args()
    if args.run is not None:
        run(args.run, args.durable)
        return
    prepare_database()
    extra = ["--durable"] if args.durable else []
    for _ in range(args.rounds):
        counted = instructions(args.warm + args.cycles, extra) - instructions(args.warm, extra)
        print(f"cycle {counted / args.cycles / 1e6:.2f} M instructions")


def run(cycles: int, durable: bool) -> None:
    one: Callable[[], object]
    if durable:
        runner = InProcessDurable()
        set_runner(runner)
        one = runner.cycle
    else:
        set_runner(InlineRunner(workers=0))
        one = partial(cycle, True)
    for _ in range(cycles):
        one()
    broadcast.flush()


def instructions(cycles: int, extra: list[str]) -> int:
    """The instructions of this process running ``cycles`` cycles, start-up included."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "callgrind.out"
        command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "-q"]
        command += [sys.executable, __file__, "--run", str(cycles), *extra]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        counted = callgrind.totals(out)
    if counted is None:
        raise RuntimeError("callgrind wrote no totals")
    return counted


if __name__ == "__main__":
    main()
