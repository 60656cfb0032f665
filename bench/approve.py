"""Benchmark: ``POST /agent/tool-call/approve`` with 50 concurrent deciders, production layout.

    DATABASE_URL=postgres://…/airlock .venv/bin/python bench/approve.py \\
        [--before /tmp/worktree-of-main] [--rounds 2] [--gunicorn 4,8] [--rate 200] [--prepared]

Uses the database ``<name>_approve`` next to ``DATABASE_URL`` (created if missing, its agent tables
emptied and refilled with ``bench.pending``'s shape at a smaller size: 80,000 threads of 3
calls, 8,000 waiting runs with 2 pending calls each, the first of each for ``finance``). The
server is the README's web command, ``gunicorn config.wsgi -c python:agent_core.gunicorn
--workers 4 --threads 8`` (without ``-c`` for a tree that predates it), with
persistent, health-checked connections (``CONN_MAX_AGE=60``). Each approved call has a sibling
still pending, so its run stays parked: the decision path (authenticate, authorize, lock,
compare-and-set, stream frame, audit row, commit), not the agent loop.

50 deciders (``bench.deciders``: one asyncio client, a kept-alive connection each, token auth,
one finance approver) decide ``--approvals`` distinct calls, twice: in a **closed loop** (as fast
as answers come: the most the server takes) and in an **open loop** at ``--rate`` decisions/s
(latency counted from each request's planned time). With ``--before`` (a worktree of another
commit, e.g. ``git worktree add --detach /tmp/before main``) its code serves alternate turns, on
the same database and Redis; with ``--prepared``, this code with server-side binding
(``bench.prepared_settings``: PostgreSQL parses and plans each statement once per connection).
Then the floors, same server shape, same clients:

- ``noop``: ``/bench/noop``, the same middleware, authentication, actor and body parsing with no
  decision (``bench.approve_floor``);
- ``hello``: a bare WSGI app under the same gunicorn (``bench.hello_wsgi``).

Printed per server: p50 / p99 ms and decisions/s of each loop, the CPU per request of the web
server (all its processes), of the PostgreSQL backends serving the database and of the client,
and the targets (issue 18: p99 ≤ 100 ms, ≥ 200 decisions/s).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse, urlunparse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.database import bulk_load  # noqa: E402
from bench.deciders import Batch, decide  # noqa: E402
from bench.pending import free_port, percentiles, shape  # noqa: E402
from bench.proc import processes  # noqa: E402

THREADS, CALLS_PER_RUN, DECIDERS, WARM_UP = 80_000, 3, 50, 100
P99_TARGET_MS, RATE_TARGET = 100.0, 200.0
BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Server:
    """What one turn serves: whose code, which WSGI app, which settings, which path."""

    name: str
    root: Path
    app: str = "config.wsgi"
    settings: str = "bench.pending_settings"
    path: str = "/agent/tool-call/approve"
    decides: bool = True  # False: a floor, which consumes no calls


def database_url() -> str:
    url = urlparse(os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/airlock"))
    name = url.path.lstrip("/") + "_approve"
    import psycopg

    admin = urlunparse(url._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
    return urlunparse(url._replace(path=f"/{name}"))


def serve(server: Server, url: str, shape: tuple[str, str]) -> tuple[subprocess.Popen[bytes], int]:
    import httpx

    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "DEBUG": "0",
        "DJANGO_SETTINGS_MODULE": server.settings,
        "CONN_MAX_AGE": "60",
        "PYTHONPATH": str(server.root),
    }
    workers, threads = shape
    command = [str(BIN / "gunicorn"), server.app, "--workers", workers, "--threads", threads]
    if server.app == "config.wsgi" and (server.root / "agent_core" / "gunicorn.py").exists():
        command += ["-c", "python:agent_core.gunicorn"]  # the README's, where the tree has it
    process = subprocess.Popen(
        [*command, "--bind", f"127.0.0.1:{port}"],
        cwd=server.root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(f"http://127.0.0.1:{port}/", timeout=5)
            return process, port
        except httpx.TransportError:
            assert time.monotonic() < deadline, f"{server.name} did not start"
            time.sleep(0.2)


def cpu(server: subprocess.Popen[bytes]) -> tuple[float, float]:
    """CPU seconds used so far by the server and its workers, and by the PostgreSQL backends
    serving this database (Linux ``/proc``)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
        backends = {pid for (pid,) in cursor.fetchall()}
    found = processes()
    workers = {server.pid} | {p.pid for p in found.values() if p.ppid == server.pid}
    used = [sum(found[pid].cpu for pid in pids if pid in found) for pids in (workers, backends)]
    return used[0], used[1]


def turn(
    server: Server, url: str, token: str, calls: list[str], args: argparse.Namespace
) -> list[str]:
    """One server's rows: its closed loop and its open loop."""
    workers, threads = args.gunicorn.split(",")
    process, port = serve(server, url, (workers, threads))

    def measure(ids: list[str], rate: float | None) -> tuple[Batch, float, float]:
        web, database = cpu(process)
        batch = decide(port, token, ids, deciders=DECIDERS, rate=rate, path=server.path)
        assert not batch.errors, f"{server.name}: non-200 answers {batch.errors[:5]}"
        web_after, database_after = cpu(process)
        return batch, web_after - web, database_after - database

    split = WARM_UP + args.approvals
    try:
        decide(port, token, calls[:WARM_UP], deciders=DECIDERS, path=server.path)  # warm up
        rows = [
            row(server.name, None, *measure(calls[WARM_UP:split], None)),
            row(server.name, args.rate, *measure(calls[split:], args.rate)),
        ]
    finally:
        process.terminate()
        process.wait(timeout=30)
    return rows


def row(name: str, rate: float | None, batch: Batch, web: float, database: float) -> str:
    median, p99 = percentiles(batch.samples)
    n = len(batch.samples)
    throughput = n / batch.wall
    met = "met" if p99 <= P99_TARGET_MS else "not met"
    if rate is None:
        loop, rate_met = "closed", throughput >= RATE_TARGET
    else:
        # The open loop's rate is offered: met when it is the target's and the server kept up
        # (the last answers' latency stretches the wall a little past the last planned send).
        loop, rate_met = f"open {rate:g}/s", rate >= RATE_TARGET and throughput >= 0.98 * rate
    load = os.getloadavg()[0]
    return (
        f"| {name} | {loop} | {n:,} | {median:.1f} | {p99:.1f} ({met}) | {throughput:.0f}"
        f" ({'met' if rate_met else 'not met'}) | {1000 * web / n:.2f} | {1000 * database / n:.2f}"
        f" | {1000 * batch.client_cpu / n:.2f} | {load:.1f} |"
    )


def load_calls(url: str) -> tuple[str, list[str]]:
    """Refill the database; the bench approver's token and the calls it will decide."""
    os.environ["DATABASE_URL"] = url
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.pending_settings"
    os.environ["DEBUG"] = "0"
    import django

    django.setup()
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from django.db import connection
    from rest_framework.authtoken.models import Token

    call_command("migrate", verbosity=0)
    fran, _ = User.objects.get_or_create(username="bench-fran")
    fran.groups.add(Group.objects.get_or_create(name="finance")[0])
    alice, _ = User.objects.get_or_create(username="bench-alice")
    token, _ = Token.objects.get_or_create(user=fran)
    bulk_load(shape(f"user:{alice.pk}", threads=THREADS, calls=CALLS_PER_RUN))
    with connection.cursor() as cursor:
        # Every run's first pending call is finance's: 8,000 for the bench approver to decide.
        cursor.execute(
            "UPDATE agent_core_toolcall SET approver = 'finance'"
            " WHERE status = 'pending_approval' AND position = 0 RETURNING id"
        )
        calls = sorted(r[0] for r in cursor.fetchall())
    return token.key, calls


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--before", type=Path, help="a worktree whose code serves alternate turns")
    parser.add_argument("--rounds", type=int, default=1, help="turns of each server")
    parser.add_argument("--approvals", type=int, default=1000, help="decisions per loop")
    parser.add_argument("--rate", type=float, default=RATE_TARGET, help="the open loop's rate")
    parser.add_argument("--gunicorn", default="4,8", help="workers,threads (README: 4,8)")
    parser.add_argument("--floors", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument(
        "--prepared", action="store_true", help="also after with prepared statements (a turn each)"
    )
    args = parser.parse_args()
    url = database_url()
    token, calls = load_calls(url)
    servers = [Server("after", ROOT)]
    if args.prepared:
        servers.append(Server("after, prepared", ROOT, settings="bench.prepared_settings"))
    if args.before:
        servers.insert(0, Server("before", args.before.resolve()))
    turns = [s for _ in range(args.rounds) for s in servers]
    if args.floors:
        settings = "bench.approve_settings"
        turns += [
            Server("floor: no-op view", ROOT, settings=settings, path="/bench/noop", decides=False),
            Server("floor: hello WSGI", ROOT, app="bench.hello_wsgi", decides=False),
        ]
    per_turn = WARM_UP + 2 * args.approvals
    needed = per_turn * sum(s.decides for s in turns)
    assert len(calls) >= needed, f"{len(calls)} calls to decide, {needed} needed"
    rows, left = [], calls
    for server in turns:
        # A floor decides nothing: any ids serve it.
        rows += turn(server, url, token, (left if server.decides else calls)[:per_turn], args)
        if server.decides:
            left = left[per_turn:]
    print(f"\ngunicorn {args.gunicorn.replace(',', 'x')}, {DECIDERS} concurrent deciders")
    print(f"targets (issue 18): p99 ≤ {P99_TARGET_MS:g} ms, ≥ {RATE_TARGET:g} decisions/s")
    print(
        "| server | loop | decisions | p50 ms | p99 ms | decisions/s | CPU ms/decision: web"
        " | PostgreSQL | client | load (1 min) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
