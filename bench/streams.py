"""Stream benchmark: SSE throughput, commit-to-client latency across processes, subscribers.

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/streams.py [--quick] [--floor]
        [--subscribers 1,10,100,1000] [--server uvicorn|daphne] [--per-client 500] [--access-log]

Starts two real streams processes (uvicorn by default, the README's streams server, started as
the README starts it: ``--no-access-log`` unless ``--access-log``;
``tests.live.settings``: inline runner, header actors) on the database of ``DATABASE_URL``
(migrated first) and measures:

1. frames per second one run streams to one SSE subscriber (the ``live`` agent, one text frame
   per word: ``STREAM_FRAME_FLUSH_BYTES=1``), live and replayed from the table;
2. latency from a frame's commit (written by this process) to its arrival at an SSE client
   attached to another process (median, p99);
3. commit-to-client latency with N concurrent SSE subscribers of one run on one streams process
   (``--subscribers``), 50 frames 50 ms apart, beside issue 18's targets (met / NOT met), with
   the time to attach them all, the server's CPU per stream attached (while they attach and read
   the table) and per delivered frame, and the clients' CPU;
   ``--floor``: the same clients and frames against ``bench.sse_floor``, a bare ASGI app on the
   same server writing the same bytes from memory (the lower bound).

The clients are separate processes of ``--per-client`` subscribers each, plain asyncio
protocols that only look for the frames' stamps (their CPU is printed: they must not be what is
measured).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.live.settings")

import django  # noqa: E402

django.setup()

import httpx  # noqa: E402
from asgiref.sync import sync_to_async  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import transaction  # noqa: E402

from agent_core.engine import frames, stream_log  # noqa: E402
from agent_core.engine.frames import Frame  # noqa: E402
from agent_core.models import Run, Thread  # noqa: E402
from bench.proc import cpu_seconds  # noqa: E402
from bench.sse_clients import ACTOR, PER_CLIENT, run_clients  # noqa: E402
from tests.live.server import Server, start_server  # noqa: E402


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def read_sse(
    client: httpx.AsyncClient, url: str, on_frame: Any, ready: asyncio.Event
) -> None:
    """Read an SSE stream until ``done`` / ``error``; ``on_frame(seq, data, arrived)``."""
    async with client.stream("GET", url, headers=ACTOR) as response:
        assert response.status_code == 200, response.status_code
        seq, event = None, "message"
        async for line in response.aiter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
                if event == "meta":
                    ready.set()
            elif line.startswith("id:"):
                seq = int(line[3:])
            elif line.startswith("data:"):
                if event in ("done", "error"):
                    return
                if event == "message":
                    on_frame(seq, json.loads(line[5:]), time.time())
            elif line == "":
                event = "message"


async def throughput(server: Server, words: int) -> tuple[float, float, int]:
    async with httpx.AsyncClient(base_url=server.url, timeout=120) as client:
        started = await client.post(
            "/agent/chat", json={"agent": "live", "message": str(words)}, headers=ACTOR
        )
        run_id = started.json()["run_id"]
        arrivals: list[float] = []
        await read_sse(
            client,
            f"/agent/chat/{run_id}/stream",
            lambda s, d, t: arrivals.append(t),
            asyncio.Event(),
        )
        live_rate = len(arrivals) / (arrivals[-1] - arrivals[0])
        replayed: list[float] = []
        begin = time.time()
        await read_sse(
            client,
            f"/agent/chat/{run_id}/stream",
            lambda s, d, t: replayed.append(t),
            asyncio.Event(),
        )
        replay_rate = len(replayed) / (replayed[-1] - begin)
        return live_rate, replay_rate, len(arrivals)


@sync_to_async
def _new_run() -> str:
    thread = Thread.objects.create(owner_ref=ACTOR["X-Actor-Id"], agent="live")
    # Status "waiting": no driver touches it; this process writes its frames.
    return Run.objects.create(
        thread=thread, agent="live", actor_ref="bench", runner="inline", status="waiting"
    ).pk


@sync_to_async
def _emit_stamped(run_id: str, i: int) -> None:
    with transaction.atomic():
        stream_log.emit(run_id, [Frame("text", {"text": f"t{i}", "t": time.time()})])


@sync_to_async
def _emit_warm_up(run_id: str) -> None:
    with transaction.atomic():
        stream_log.emit(run_id, [Frame("text", {"text": "warm-up"})])


@sync_to_async
def _end(run_id: str) -> None:
    with transaction.atomic():
        stream_log.emit(run_id, [frames.finish("completed")])
        Run.objects.filter(pk=run_id).update(status="completed")


class Commits:
    """Frames of a fresh run committed by this process (``stream_log.emit``), published after commit
    through Redis to the streams process."""

    run_id = ""

    async def start(self) -> str:
        self.run_id = await _new_run()
        return self.run_id

    async def warm_up(self) -> None:
        await _emit_warm_up(self.run_id)

    async def frame(self, i: int) -> None:
        await _emit_stamped(self.run_id, i)

    async def end(self) -> None:
        await _end(self.run_id)


class Floor:
    """The same frames, stamped here and posted to ``bench.sse_floor`` (no Django, Redis or
    database between them and the clients) on one kept connection."""

    def __init__(self, server: Server) -> None:
        self.url = server.url
        self.client: httpx.AsyncClient | None = None

    async def start(self) -> str:
        self.client = httpx.AsyncClient(base_url=self.url)
        return "floor"

    async def warm_up(self) -> None:
        await self._post(b"id: 0\ndata: " + b'{"kind":"text","text":"warm-up"}\n\n')

    async def frame(self, i: int) -> None:
        data = {"kind": "text", "text": f"t{i}", "t": time.time()}
        await self._post(
            f"id: {i + 1}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()
        )

    async def end(self) -> None:
        await self._post(b"")
        assert self.client is not None
        await self.client.aclose()

    async def _post(self, block: bytes) -> None:
        assert self.client is not None
        await self.client.post("/", content=block)


Emitter = Commits | Floor


@dataclass
class Latency:
    subscribers: int
    samples: list[float]
    attach_seconds: float  # from the first client's first connection to the last stream's ``meta``
    attach_cpu_seconds: float  # the serving process's, while they attach and read the table
    warm_seconds: float  # from the warm-up frame's commit to its arrival on every stream
    client_cpu_seconds: float
    server_cpu_seconds: float  # the serving process's, from the warm-up frame to the last frame


async def latency(
    server: Server, subscribers: int, frames: int, gap: float, per_client: int, emitter: Emitter
) -> Latency:
    """Per-frame latency (ms) over every subscriber of one run on ``server``."""
    run_id = await emitter.start()
    context = multiprocessing.get_context("spawn")
    ready, results = context.Queue(), context.Queue()
    sizes = [min(per_client, subscribers - i) for i in range(0, subscribers, per_client)]
    clients = [
        context.Process(target=run_clients, args=(server.url, run_id, n, ready, results))
        for n in sizes
    ]
    attach_cpu = cpu_seconds(server.process.pid)
    for process in clients:
        process.start()
    try:
        attached = [await asyncio.to_thread(ready.get, True, 300) for _ in clients]
        assert all(what == "attached" for what, _, _ in attached), attached
        await asyncio.sleep(0.5)  # every stream has read the table after its meta
        attach_cpu = cpu_seconds(server.process.pid) - attach_cpu
        warm_up = time.time()
        await emitter.warm_up()
        warm = [await asyncio.to_thread(ready.get, True, 300) for _ in clients]
        assert all(what == "warm" for what, _, _ in warm), warm
        cpu = cpu_seconds(server.process.pid)
        for i in range(frames):
            await emitter.frame(i)
            await asyncio.sleep(gap)
        await asyncio.sleep(1.0)  # the last deliveries; the streams' closing reads not counted
        cpu = cpu_seconds(server.process.pid) - cpu
        await emitter.end()
        samples: list[float] = []
        client_cpu = 0.0
        for _ in clients:
            got, seconds = await asyncio.to_thread(results.get, True, 300)
            samples += got
            client_cpu += seconds
        return Latency(
            subscribers,
            samples,
            max(t for _, t, _ in attached) - min(t for _, _, t in attached),
            attach_cpu,
            max(t for _, t, _ in warm) - warm_up,
            client_cpu,
            cpu,
        )
    finally:
        for process in clients:
            process.join(10)
            if process.is_alive():
                process.kill()


# issue 18's targets: p99 (ms) of commit -> client, by subscribers of one run on one process (the
# frames are committed by this process, another than the server's).
TARGETS = {10: 25.0, 1000: 100.0}


async def main(
    quick: bool,
    subscribers: list[int],
    server: str,
    per_client: int,
    floor: bool,
    access_log: bool,
) -> None:
    logs = Path(tempfile.mkdtemp(prefix="airlock-bench-"))
    # uvicorn as the README's streams command starts it, without an access log (``--access-log``:
    # with uvicorn's default one); daphne writes none unless told.
    options = ["--no-access-log"] if server == "uvicorn" and not access_log else []
    a = start_server(logs / "a.log", server=server, options=options, AIRLOCK_FLUSH_BYTES="1")
    b = start_server(logs / "b.log", server=server, options=options)
    bare = start_server(
        logs / "floor.log", server=server, options=options, app="bench.sse_floor:app"
    )
    try:
        words = 300 if quick else 1500
        live_rate, replay_rate, count = await throughput(a, words)
        print(
            f"throughput: {count} frames, live {live_rate:.0f} frames/s, "
            f"replay {replay_rate:.0f} frames/s"
        )
        one = await latency(b, 1, 100 if quick else 500, 0.01, per_client, Commits())
        print(
            "latency (1 subscriber, other process): "
            f"median {statistics.median(one.samples):.1f} ms, "
            f"p99 {percentile(one.samples, 99):.1f} ms"
        )
        print(
            f"\n{server}, {len(os.sched_getaffinity(0))} CPUs, load {os.getloadavg()[0]:.1f}; "
            "commit (this process) -> SSE client of another process; the targets are issue 18's; "
            "floor: bench.sse_floor (the same bytes from memory, no Django)"
        )
        print(
            "| subscribers | p50 ms | p99 ms | target p99 | frames received | attach s | warm s "
            "| server CPU µs / attach | server CPU µs / delivery | client CPU s |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        rows: list[tuple[str, Server, Emitter | None]] = [("", b, None)]
        if floor:
            rows.append((" floor", bare, Floor(bare)))
        for n in subscribers:
            for label, target_server, emitter in rows:
                run = await asyncio.wait_for(
                    latency(
                        target_server,
                        n,
                        20 if quick else 50,
                        0.05,
                        per_client,
                        emitter or Commits(),
                    ),
                    300,
                )
                _row(f"{n:,}{label}", run, None if emitter else TARGETS.get(n))
    finally:
        a.stop()
        b.stop()
        bare.stop()


def _row(label: str, run: Latency, target: float | None) -> None:
    p50, p99 = statistics.median(run.samples), percentile(run.samples, 99)
    verdict = "" if target is None else f"≤ {target:.0f}: {'met' if p99 <= target else 'NOT met'}"
    per_delivery = run.server_cpu_seconds / max(1, len(run.samples)) * 1e6
    per_attach = run.attach_cpu_seconds / run.subscribers * 1e6
    print(
        f"| {label} | {p50:.1f} | {p99:.1f} | {verdict} | {len(run.samples):,} "
        f"| {run.attach_seconds:.2f} | {run.warm_seconds:.2f} | {per_attach:.0f} "
        f"| {per_delivery:.0f} | {run.client_cpu_seconds:.1f} |"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller runs, for a smoke test")
    parser.add_argument(
        "--subscribers", default="1,10,100,1000", help="comma-separated subscriber counts"
    )
    parser.add_argument("--server", default="uvicorn", choices=["daphne", "uvicorn"])
    parser.add_argument(
        "--per-client", type=int, default=PER_CLIENT, help="subscribers per client process"
    )
    parser.add_argument(
        "--floor", action="store_true", help="also measure bench.sse_floor (a bare ASGI app)"
    )
    parser.add_argument(
        "--access-log", action="store_true", help="uvicorn with its access log (its default)"
    )
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    counts = [int(n) for n in args.subscribers.split(",")]
    asyncio.run(main(args.quick, counts, args.server, args.per_client, args.floor, args.access_log))
