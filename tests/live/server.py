"""Start a real daphne process on a socket bound to a free port (port 0: no collisions)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.processes import ROOT, django_env


@dataclass
class Server:
    """A daphne process serving ``config.asgi`` with ``tests.live.settings``."""

    process: subprocess.Popen[bytes]
    url: str
    log: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_server(
    log: Path,
    *,
    python: str = sys.executable,
    app: str = "config.asgi:application",
    cwd: str | Path = ROOT,
    env: dict[str, str] | None = None,
    server: str = "daphne",
    options: Sequence[str] = (),
    **extra: str,
) -> Server:
    """Start daphne on a fresh socket and wait until it answers HTTP: with ``tests.live.settings``
    on the test database (``extra``: more environment), or with exactly ``env`` when ``python``,
    ``app`` and ``cwd`` are another virtualenv's daphne serving another project, as the packaging
    test does; ``server="uvicorn"``: uvicorn instead (the benchmarks); ``options``: more of the
    server's command-line options."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(512)
    port = sock.getsockname()[1]
    if env is None:
        environment = django_env(**{"DJANGO_SETTINGS_MODULE": "tests.live.settings", **extra})
    else:
        environment = {**env, **extra}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [python, "-m", server, "--fd", str(sock.fileno()), *options, app],
            cwd=cwd,
            env=environment,
            pass_fds=[sock.fileno()],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    sock.close()
    started = Server(process, f"http://127.0.0.1:{port}", log)
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"{server} exited: {log.read_text()[-3000:]}")
        try:
            # A cheap request (401): building the schema on a loaded machine is slow, and
            # drf-spectacular's first, lazy schema build is not safe to run twice at once.
            httpx.get(f"{started.url}/agent/runs", timeout=30)
            return started
        except httpx.TransportError:
            if time.monotonic() > deadline:
                started.stop()
                raise RuntimeError(f"{server} did not start: {log.read_text()[-3000:]}") from None
            time.sleep(0.1)
