"""Real Celery worker processes (and beat) against pytest-django's test database and Redis.

The tests SIGKILL workers at chosen moments; ``Cluster`` starts them with the environment the
test picks (pause points, see ``faults.py``; tool delays) and always cleans up: it stops whatever
it started before the transactional test database is flushed.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings
from django.db import connection

from agent_core.actors import Actor
from agent_core.engine import runs
from agent_core.engine.dispatch import set_runner
from agent_core.models import Run, StreamFrame
from agent_core.runner.durable import DurableRunner
from tests.conftest import ALICE
from tests.processes import django_env

REPO = Path(__file__).resolve().parents[2]
LEASE_SECONDS = 2


class Cluster:
    """Worker and beat processes started by one test (of ``config``'s Celery app unless told
    another ``python``, ``app``, ``cwd`` and environment, as the packaging test does)."""

    def __init__(
        self,
        tmp: Path,
        *,
        python: str = sys.executable,
        app: str = "config",
        cwd: Path = REPO,
        env: dict[str, str] | None = None,
    ) -> None:
        self.tmp = tmp
        self.python, self.app, self.cwd, self.base_env = python, app, cwd, env
        self.procs: list[subprocess.Popen[bytes]] = []
        self._count = 0
        self.names: dict[int, str] = {}

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        if self.base_env is not None:
            return {**self.base_env, **(extra or {})}
        return django_env(
            AGENT_RUNNER="durable",
            AIRLOCK_TEST_LEASE_SECONDS=str(LEASE_SECONDS),
            AIRLOCK_TEST_SWEEP_SECONDS="1",
            **(extra or {}),
        )

    def _spawn(self, args: list[str], name: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
        log = open(self.tmp / f"{name}.log", "wb")
        proc = subprocess.Popen(
            [self.python, "-m", "celery", "-A", self.app, *args],
            cwd=self.cwd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        self.procs.append(proc)
        self.names[proc.pid] = name
        return proc

    def worker(
        self, queues: str = "agent.llm,agent.tool", *, pool: str = "solo", **extra: str
    ) -> subprocess.Popen[bytes]:
        """Start a worker taking one task at a time on ``queues`` with extra environment: solo,
        or ``pool="prefork"`` with one child process (``pool_child`` names it)."""
        self._count += 1
        name = f"w{self._count}"
        args = ["worker", "-P", pool, "-c", "1", "-Q", queues, "-n", f"{name}@%h", "-l", "info"]
        args += ["--without-gossip", "--without-mingle", "--without-heartbeat"]
        return self._spawn(args, name, self.env(extra))

    def beat(self) -> subprocess.Popen[bytes]:
        args = ["beat", "-s", str(self.tmp / "beat-schedule"), "--max-interval", "1", "-l", "info"]
        return self._spawn(args, "beat", self.env())

    @staticmethod
    def kill(proc: subprocess.Popen[bytes]) -> None:
        """SIGKILL: no cleanup, no ack, no rollback but the database's own."""
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    @staticmethod
    def pool_child(proc: subprocess.Popen[bytes]) -> int:
        """The pid of a prefork worker's one child process, the one that runs its tasks."""
        # Per thread of the worker: its pool's supervisor thread forks the replacements.
        threads = Path(f"/proc/{proc.pid}/task").iterdir()
        children = [pid for t in threads for pid in (t / "children").read_text().split()]
        assert len(children) == 1, f"children of worker {proc.pid}: {children}"
        return int(children[0])

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()

    def log_of(self, proc: subprocess.Popen[bytes]) -> str:
        return (self.tmp / f"{self.names[proc.pid]}.log").read_text(errors="replace")

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-4000:]}"
            for p in sorted(self.tmp.glob("*.log"))
        )


def _flush_broker() -> None:
    redis.Redis.from_url(settings.REDIS_URL).flushdb()


@pytest.fixture
def cluster(transactional_db: None, tmp_path: Path, settings: Any) -> Iterator[Cluster]:
    """A durable runner in this (the "web") process, and a Celery cluster started on demand."""
    settings.AGENT = {**settings.AGENT, "RUNNER": "durable", "LEASE_SECONDS": LEASE_SECONDS}
    _flush_broker()
    set_runner(DurableRunner())
    found = Cluster(tmp_path)
    yield found
    found.stop_all()
    set_runner(None)
    _flush_broker()


def start(message: str, *, agent: str = "crash", actor: Actor = ALICE) -> Run:
    return runs.start_run(agent=agent, message=message, actor=actor)


def assert_frames_gapless(run_id: str) -> None:
    seqs = list(
        StreamFrame.objects.filter(run_id=run_id).order_by("seq").values_list("seq", flat=True)
    )
    assert seqs == list(range(1, len(seqs) + 1)), f"frame numbering of {run_id}: {seqs}"
    assert Run.objects.get(pk=run_id).last_seq == len(seqs)


def idle_in_transaction() -> int:
    """Sessions of the test database holding an open transaction (a worker inside an atomic
    tool, paused before its commit)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND state = 'idle in transaction' AND pid <> pg_backend_pid()"
        )
        row = cursor.fetchone()
    return int(row[0]) if row else 0
