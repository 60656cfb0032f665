"""Benchmark: ``POST /agent/tool-call/approve`` with 50 concurrent deciders, by process layout.

    DATABASE_URL=postgres://…/airlock .venv/bin/python bench/approve.py [--layouts daphne,gunicorn]

Uses the database ``<name>_approve`` next to ``DATABASE_URL`` (created if missing, its agent tables
emptied and refilled with ``bench.pending``'s shape at a smaller size: 80,000 threads of 3
calls, 8,000 waiting runs with 2 pending calls each). For each layout, a real server on a random
port, 50 threads with their own HTTP connections (token auth, one finance approver) deciding
``--approvals`` distinct calls at once; each approved call has a sibling still pending, so its run
stays parked: the decision path (authorize, lock, compare-and-set, stream frame, audit row,
commit), not the agent loop. Layouts:

- ``daphne``: one daphne process, a connection per request (``CONN_MAX_AGE=0``): before issue 18;
- ``gunicorn``: the README's web command (``gunicorn … --workers 4 --threads 8``) with persistent,
  health-checked connections (``CONN_MAX_AGE=60``): the production layout.

The floor, measured in the same run: one committed single-row ``UPDATE`` on a kept connection
(median of 200), the least any decision costs.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlparse, urlunparse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.database import bulk_load  # noqa: E402
from bench.pending import free_port, percentiles, shape  # noqa: E402

THREADS, CALLS_PER_RUN, DECIDERS = 80_000, 3, 50
BIN = Path(sys.executable).parent
LAYOUTS = {
    "daphne": (["daphne", "-b", "127.0.0.1", "-p", "{port}", "config.asgi:application"], "0"),
    "gunicorn": (
        [
            "gunicorn",
            "config.wsgi",
            "--workers",
            "4",
            "--threads",
            "8",
            "--bind",
            "127.0.0.1:{port}",
        ],
        "60",
    ),
}


def database_url() -> str:
    url = urlparse(os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/airlock"))
    name = url.path.lstrip("/") + "_approve"
    import psycopg

    admin = urlunparse(url._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
    return urlunparse(url._replace(path=f"/{name}"))


def floor_ms() -> float:
    from django.db import connection, transaction

    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE IF NOT EXISTS bench_floor (id int PRIMARY KEY, n int)")
        cursor.execute("INSERT INTO bench_floor VALUES (1, 0) ON CONFLICT DO NOTHING")
    samples = []
    for _ in range(200):
        started = time.perf_counter()
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("UPDATE bench_floor SET n = n + 1 WHERE id = 1")
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1000


def serve(layout: str, url: str) -> tuple[subprocess.Popen[bytes], str]:
    import httpx

    command, max_age = LAYOUTS[layout]
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "DEBUG": "0",
        "DJANGO_SETTINGS_MODULE": "bench.pending_settings",
        "CONN_MAX_AGE": max_age,
        "PYTHONPATH": str(ROOT),
    }
    program, *args = (part.format(port=port) for part in command)
    server = subprocess.Popen(
        [str(BIN / program), *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(f"{base}/agent/approvals/pending", timeout=5)
            return server, base
        except httpx.TransportError:
            assert time.monotonic() < deadline, f"{layout} did not start"
            time.sleep(0.2)


def decide(base: str, token: str, call_ids: list[str]) -> tuple[list[float], float]:
    """Each decider: one kept-alive connection with the standard library's ``http.client``
    (lighter than httpx: the client shares the machine's two cores with the server)."""
    host, port = urlparse(base).hostname, urlparse(base).port
    slices = [call_ids[i::DECIDERS] for i in range(DECIDERS)]
    samples: list[float] = []
    errors: list[int] = []
    lock = threading.Lock()
    barrier = threading.Barrier(DECIDERS + 1)
    headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}

    def decider(ids: list[str]) -> None:
        connection = http.client.HTTPConnection(str(host), port, timeout=60)
        barrier.wait()
        for call_id in ids:
            started = time.perf_counter()
            body = json.dumps({"tool_call_id": call_id})
            connection.request("POST", "/agent/tool-call/approve", body, headers)
            response = connection.getresponse()
            response.read()
            elapsed = time.perf_counter() - started
            with lock:
                samples.append(elapsed)
                if response.status != 200:
                    errors.append(response.status)
        connection.close()

    threads = [threading.Thread(target=decider, args=(s,)) for s in slices]
    for t in threads:
        t.start()
    barrier.wait()
    started = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    assert not errors, f"non-200 answers: {errors[:5]}"
    return samples, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layouts", default="daphne,gunicorn", help="comma-separated")
    parser.add_argument("--approvals", type=int, default=1000, help="decisions per layout")
    parser.add_argument(
        "--gunicorn", default="4,8", help="the gunicorn layout's workers,threads (README: 4,8)"
    )
    args = parser.parse_args()
    layouts = args.layouts.split(",")
    workers, threads = args.gunicorn.split(",")
    command = LAYOUTS["gunicorn"][0]
    command[command.index("--workers") + 1] = workers
    command[command.index("--threads") + 1] = threads
    url = database_url()
    os.environ["DATABASE_URL"] = url
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.pending_settings"
    os.environ["DEBUG"] = "0"
    import django

    django.setup()
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from rest_framework.authtoken.models import Token

    from agent_core.models import CallStatus, ToolCall

    call_command("migrate", verbosity=0)
    fran, _ = User.objects.get_or_create(username="bench-fran")
    fran.groups.add(Group.objects.get_or_create(name="finance")[0])
    alice, _ = User.objects.get_or_create(username="bench-alice")
    token, _ = Token.objects.get_or_create(user=fran)
    bulk_load(shape(f"user:{alice.pk}", threads=THREADS, calls=CALLS_PER_RUN))
    pending = ToolCall.objects.filter(
        status=CallStatus.PENDING_APPROVAL, approver="finance", position=0
    )
    targets = list(pending.order_by("id").values_list("id", flat=True))
    assert len(targets) >= args.approvals * len(layouts), len(targets)
    rows = []
    for i, layout in enumerate(layouts):
        server, base = serve(layout, url)
        try:
            # Warm every worker process and thread a little (imports, first connections).
            decide(base, token.key, targets[-(i + 1) * DECIDERS * 2 :][: DECIDERS * 2])
            floor = floor_ms()
            ids = targets[i * args.approvals : (i + 1) * args.approvals]
            samples, wall = decide(base, token.key, ids)
        finally:
            server.terminate()
            server.wait(timeout=30)
        median, p99 = percentiles(samples)
        name = f"gunicorn {workers}x{threads}" if layout == "gunicorn" else layout
        rows.append(
            f"| {name} | {len(samples):,} | {median:.1f} | {p99:.1f} | {len(samples) / wall:.0f} "
            f"| {floor:.2f} | {median / floor:.0f}x |"
        )
    print(f"\n{DECIDERS} concurrent deciders; target: p99 ≤ 100 ms, ≥ 200 decisions/s")
    print("| layout | decisions | p50 ms | p99 ms | decisions/s | floor ms | p50 / floor |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
