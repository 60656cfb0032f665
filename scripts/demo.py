#!/usr/bin/env python3
"""Run the Airlock demo: migrate, seed the demo data, then serve it.

Usage (normally through `make demo`, which also provides PostgreSQL and Redis):
    python scripts/demo.py

Environment:
    PORT                    web port (default 8000)
    DJANGO_SETTINGS_MODULE  default config.settings.dev
    AGENT_RUNNER=durable    also run a Celery worker and Celery beat

The long-running processes are supervised: Ctrl-C or SIGTERM stops them all, and if one of them
exits on its own the others are stopped too and the demo exits non-zero.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Final

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
# The virtualenv's bin directory (not resolved: .venv/bin/python is a symlink out of the venv).
BIN_DIR: Final = Path(sys.executable).parent
HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8000
STARTUP_TIMEOUT: Final = 60.0  # seconds for the web server to answer its first request
STOP_TIMEOUT: Final = 15.0  # seconds for children to stop after SIGTERM, before SIGKILL
POLL_INTERVAL: Final = 0.2


@dataclass(frozen=True)
class DemoLogin:
    role: str
    username: str
    password: str


# Created by `manage.py seed_demo`.
DEMO_LOGINS: Final = (
    DemoLogin("requester", "alice", "demo"),
    DemoLogin("finance approver", "fran", "demo"),
    DemoLogin("operator", "otto", "demo"),
    DemoLogin("second marketer", "mia", "demo"),
)


@dataclass(frozen=True)
class Command:
    name: str
    argv: tuple[str, ...]


def setup_steps() -> list[Command]:
    manage = (sys.executable, str(REPO_ROOT / "manage.py"))
    return [
        Command("migrate", (*manage, "migrate", "--noinput")),
        Command("seed_demo", (*manage, "seed_demo")),
        Command("seed_demo_grant", (*manage, "seed_demo_grant")),
    ]


def services(port: int, durable: bool) -> list[Command]:
    """The long-running processes; the first one is the web server."""
    web = Command(
        "web",
        (str(BIN_DIR / "daphne"), "-b", HOST, "-p", str(port), "config.asgi:application"),
    )
    if not durable:
        return [web]
    celery = str(BIN_DIR / "celery")
    # beat's schedule file would otherwise land in the repo root.
    schedule = REPO_ROOT / ".local" / "celerybeat-schedule"
    worker = "-A config worker -Q agent.llm,agent.tool -c 1 --prefetch-multiplier 1"
    return [
        web,
        Command("worker", (celery, *worker.split())),
        Command("beat", (celery, "-A", "config", "beat", "--schedule", str(schedule))),
    ]


def log(message: str) -> None:
    print(f"demo: {message}", file=sys.stderr, flush=True)


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((HOST, port))
        except OSError:
            return True
    return False


def answers_http(port: int) -> bool:
    """Whether the web server answers a request (any status). A request, not a bare connection:
    under daphne the inline runner's sweeper starts with the server's first event, and the
    demo's crash walkthrough needs it running before anyone opens a page."""
    try:
        with urllib.request.urlopen(f"http://{HOST}:{port}/console/login/", timeout=5.0):
            return True
    except urllib.error.HTTPError:
        return True  # it answered
    except OSError:
        return False


def exit_status(returncode: int) -> int:
    """Popen reports death by signal N as -N; a shell would say 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


class Supervisor:
    """Starts child processes and stops them all together.

    Each child gets its own process group: a Ctrl-C in the terminal then reaches only us, and we
    stop the children exactly once, in an orderly way (SIGTERM to the whole group, so e.g. the
    Celery pool processes too; SIGKILL after STOP_TIMEOUT).
    """

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.children: dict[str, subprocess.Popen[bytes]] = {}
        self.stop_signal: int | None = None  # set by SIGINT/SIGTERM

    def install_signal_handlers(self) -> None:
        def request_stop(signum: int, _frame: FrameType | None) -> None:
            if self.stop_signal is None:
                log(f"{signal.Signals(signum).name} received, stopping...")
            self.stop_signal = signum

        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, request_stop)

    def start(self, command: Command) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(command.argv, cwd=REPO_ROOT, env=self.env, process_group=0)
        self.children[command.name] = proc
        return proc

    def run_step(self, command: Command) -> int:
        """Run a one-off command to completion (unless we are asked to stop); its exit status."""
        proc = self.start(command)
        while proc.poll() is None and self.stop_signal is None:
            time.sleep(POLL_INTERVAL)
        self.stop_all()
        del self.children[command.name]
        return exit_status(proc.returncode)

    def exited(self) -> tuple[str, int] | None:
        """(name, exit status) of a child that has exited, if any."""
        for name, proc in self.children.items():
            if proc.poll() is not None:
                return name, exit_status(proc.returncode)
        return None

    def stop_all(self) -> None:
        running = [proc for proc in self.children.values() if proc.poll() is None]
        for proc in running:
            self._signal_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        for proc in running:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log(f"pid {proc.pid} did not stop in {STOP_TIMEOUT:.0f}s, killing it")
                self._signal_group(proc, signal.SIGKILL)
                proc.wait()
        # Leftovers in the groups (e.g. a Celery pool process whose parent died first).
        for proc in running:
            self._signal_group(proc, signal.SIGKILL)

    @staticmethod
    def _signal_group(proc: subprocess.Popen[bytes], signum: int) -> None:
        try:
            os.killpg(proc.pid, signum)  # process_group=0: its pgid is its pid
        except ProcessLookupError:  # the whole group is gone already
            pass


def print_banner(port: int, env: dict[str, str]) -> None:
    width = max(len(login.role) for login in DEMO_LOGINS)
    lines = [
        "",
        f"Airlock demo running at http://{HOST}:{port}/",
        "Demo logins (username / password):",
        *(f"  {login.role:<{width}}  {login.username} / {login.password}" for login in DEMO_LOGINS),
        "Command line, from another terminal in this directory:",
        f"  export DATABASE_URL='{env.get('DATABASE_URL', '')}'",
        f"  export REDIS_URL='{env.get('REDIS_URL', '')}'",
        "  .venv/bin/python manage.py agent chat support --as alice",
        "Press Ctrl-C to stop.",
        "",
    ]
    print("\n".join(lines), flush=True)


def main(argv: Sequence[str]) -> int:
    if argv:
        print(__doc__, file=sys.stderr if argv[0] not in ("-h", "--help") else sys.stdout)
        return 0 if argv[0] in ("-h", "--help") else 2

    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.dev")
    env.setdefault("PYTHONUNBUFFERED", "1")  # children's output appears as it happens
    try:
        port = int(env.get("PORT") or DEFAULT_PORT)
    except ValueError:
        log(f"PORT must be a number, not {env['PORT']!r}")
        return 2
    durable = env.get("AGENT_RUNNER") == "durable"

    supervisor = Supervisor(env)
    supervisor.install_signal_handlers()

    for step in setup_steps():
        log(f"running manage.py {' '.join(step.argv[2:])}")
        status = supervisor.run_step(step)
        if supervisor.stop_signal is not None:
            return 128 + supervisor.stop_signal
        if status != 0:
            log(f"{step.name} failed (exit status {status})")
            return status

    if port_in_use(port):
        log(f"port {port} is already in use on {HOST}; set PORT to use another one")
        return 1

    try:
        for command in services(port, durable):
            log(f"starting {command.name}: {' '.join(command.argv)}")
            supervisor.start(command)

        # Wait for the web server, then print where to go; then watch the children.
        banner_due = time.monotonic() + STARTUP_TIMEOUT
        banner_printed = False
        while supervisor.stop_signal is None:
            if (dead := supervisor.exited()) is not None:
                name, status = dead
                log(f"{name} exited unexpectedly (exit status {status}), stopping the rest")
                return status or 1
            if not banner_printed and answers_http(port):
                print_banner(port, env)
                banner_printed = True
            elif not banner_printed and time.monotonic() > banner_due:
                log(f"web server not accepting connections on {HOST}:{port} after startup")
                return 1
            time.sleep(POLL_INTERVAL)
        return 128 + supervisor.stop_signal
    finally:
        supervisor.stop_all()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
