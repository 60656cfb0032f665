"""Instructions PostgreSQL's backend spends on an inline approval cycle, counted by valgrind's
callgrind: the database's side of ``bench/cycle_instructions.py`` (issue 18), where timings
are too noisy to compare (on a shared machine the backend's CPU a cycle moved by ±15 % between
runs of the same code).

It makes a PostgreSQL cluster of its own in a temporary folder (``--bindir``: the server's
programs, ``pg_config --bindir`` by default; as root, run as ``--user``, for the server refuses
root), migrates a database there and makes the cycles' orders, then starts the server under
``valgrind --tool=callgrind --trace-children=yes``. A client process of this script runs
``--warm`` inline cycles over one connection, so one backend; a second runs ``--warm`` +
``--cycles``. The difference of the two backends' totals over ``--cycles`` is one cycle's
instructions in the backend, its start-up and first plans excluded (after five runs a prepared
statement keeps a generic plan: ``--warm`` is 10). The server's other processes (WAL writer,
checkpointer) are not counted.

    REDIS_URL=... .venv/bin/python bench/postgres_instructions.py [--rounds 2]

Needs valgrind (Debian's ``valgrind``); about a minute a round.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import callgrind  # noqa: E402

PORT = 5499


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warm", type=int, default=10)
    parser.add_argument("--cycles", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--bindir", type=Path, default=_bindir())
    parser.add_argument("--user", default="postgres", help="who runs the server when root does")
    parser.add_argument("--client", type=int, help=argparse.SUPPRESS)  # N cycles, one backend
    args = parser.parse_args()
    if args.client is not None:
        client(args.client)
        return
    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder)
        os.chmod(home, 0o777)  # the server's user writes its socket and callgrind's files here
        _as(args.user, [str(args.bindir / "initdb"), "-D", str(home / "data"), "-A", "trust"])
        with server(args, home, valgrind=False):
            _prepare()
        with server(args, home, valgrind=True):
            for _ in range(args.rounds):
                warm = instructions(home, args.warm)
                counted = instructions(home, args.warm + args.cycles) - warm
                print(f"backend {counted / args.cycles / 1e6:.2f} M instructions a cycle")


def client(cycles: int) -> None:
    """Print this connection's backend pid, then run ``cycles`` inline cycles on it."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    import django

    django.setup()
    from django.db import connection

    from agent_core.engine import broadcast
    from agent_core.engine.dispatch import set_runner
    from agent_core.runner.inline import InlineRunner
    from bench.approval_cycle import cycle

    set_runner(InlineRunner(workers=0))
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        print(cursor.fetchone()[0], flush=True)
    for _ in range(cycles):
        cycle(True)
    broadcast.flush()
    connection.close()


def instructions(home: Path, cycles: int) -> int:
    """The instructions of the backend that served a client running ``cycles`` cycles."""
    pid = _client(cycles).split()[0]
    out = home / f"callgrind.{pid}"
    for _ in range(600):  # callgrind writes the file as the backend exits
        if out.exists() and (totals := callgrind.totals(out)) is not None:
            return totals
        time.sleep(0.1)
    raise RuntimeError(f"callgrind wrote no totals for backend {pid}")


@contextmanager
def server(args: argparse.Namespace, home: Path, *, valgrind: bool) -> Iterator[None]:
    command = [str(args.bindir / "postgres"), "-D", str(home / "data"), "-p", str(PORT)]
    command += ["-k", str(home), "-c", "listen_addresses=127.0.0.1", "-c", "autovacuum=off"]
    if valgrind:
        out = home / "callgrind.%p"
        command = ["valgrind", "--tool=callgrind", "--trace-children=yes", "-q",
                   f"--callgrind-out-file={out}", *command]  # fmt: skip
    process = subprocess.Popen(_user(args.user) + command, stderr=subprocess.DEVNULL)
    try:
        _wait_for(args.bindir)
        yield
    finally:
        process.terminate()
        process.wait()


def _prepare() -> None:
    """Migrate the cluster's database and make the cycles' orders, in a process of its own."""
    code = "from bench.approval_cycle import prepare_database; prepare_database()"
    command = [sys.executable, "-c", f"import django; django.setup(); {code}"]
    env = {"DJANGO_SETTINGS_MODULE": "bench.settings", "PYTHONPATH": str(REPO)}
    _run(command, env)


def _client(cycles: int) -> str:
    """What a client running ``cycles`` cycles printed (its backend's pid first)."""
    return _run([sys.executable, __file__, "--client", str(cycles)])


def _run(command: list[str], env: dict[str, str] | None = None) -> str:
    database = f"postgres://postgres@127.0.0.1:{PORT}/postgres"
    environment = dict(os.environ, DATABASE_URL=database) | (env or {})
    done = subprocess.run(command, env=environment, check=True, capture_output=True, text=True)
    return done.stdout


def _wait_for(bindir: Path) -> None:
    ready = [str(bindir / "pg_isready"), "-h", "127.0.0.1", "-p", str(PORT), "-q"]
    for _ in range(600):
        if subprocess.run(ready).returncode == 0:
            return
        time.sleep(0.1)
    raise RuntimeError("the server did not start")


def _as(user: str, command: list[str]) -> None:
    subprocess.run(_user(user) + command, check=True, stdout=subprocess.DEVNULL)


def _user(user: str) -> list[str]:
    return ["runuser", "-u", user, "--"] if os.geteuid() == 0 else []


def _bindir() -> Path:
    found = shutil.which("pg_config")
    if found is None:
        return Path("/usr/lib/postgresql/15/bin")
    return Path(subprocess.run([found, "--bindir"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
