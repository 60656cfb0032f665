"""The production layout as separate processes on "hosts" of their own, against the fault tests'
own PostgreSQL and Redis (``tests.faults.services``), with short leases: for the durable runner
web (gunicorn), streams (uvicorn), two Celery workers and beat (``running_layout``); for the
inline runner two web hosts and streams (``running_inline_layout``); each on its own host.

Where the machine allows it (root on Linux, ``ip netns``), a host is a network namespace with an
address of its own on a private /24, joined by a veth pair to a bridge in this (the test's)
namespace, where PostgreSQL and Redis listen at ``.1``. Cutting a host takes its end of the
bridge down: its packets go nowhere, and its connections wait for the link as they would across
a real partition, without an error, until it heals. Elsewhere every host is 127.0.0.1 and only
the faults that need no network (freeze, restarts) run; ``cut`` skips the test.

    with running_layout(home) as layout:
        worker = layout.hosts["w1"]
        worker.freeze(); ...; worker.thaw()
        worker.cut(); ...; worker.heal()
        layout.postgres.restart("fast"); layout.redis.restart_empty(down=1)
        layout.deliver(run_id, "agent.tool")  # a step task, once more
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from agent_core.celery import STEP_TASK
from tests.faults.services import (
    Postgres,
    Redis,
    migrated_database,
    start_postgres,
    start_redis,
)
from tests.processes import GUARD_SECONDS, ROOT, django_env, manage

BIN = Path(sys.executable).parent
LEASE, SWEEP = 3, 1
# The server ends a session idle in a transaction this soon (``IDLE_IN_TRANSACTION_SECONDS``): a
# frozen process's row locks are free before its lease runs out. A refund (``DEMO_REFUND_DELAY``)
# must sleep less inside its own.
IDLE = 3
_networks = itertools.count()


@dataclass
class Network:
    """A bridge at ``prefix.1`` in this namespace and a namespace per host behind it, or nothing
    (``isolated`` false): every host on 127.0.0.1."""

    tag: str
    prefix: str
    isolated: bool
    namespaces: list[str] = field(default_factory=list)

    @property
    def hub(self) -> str:
        """Where PostgreSQL and Redis listen."""
        return f"{self.prefix}.1" if self.isolated else "127.0.0.1"

    @property
    def bridge(self) -> str:
        return f"{self.tag}br"

    def create(self) -> None:
        if not self.isolated:
            return
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.hub}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")

    def add_host(self, index: int, name: str) -> tuple[str, str | None, str | None]:
        """A namespace for host ``name``: its address, namespace and bridge-side link."""
        if not self.isolated:
            return "127.0.0.1", None, None
        namespace, inside, outside = (
            f"{self.tag}-{name}",
            f"{self.tag}h{index}",
            f"{self.tag}b{index}",
        )
        address = f"{self.prefix}.{index + 10}"
        _ip("netns", "add", namespace)
        self.namespaces.append(namespace)
        _ip("link", "add", inside, "type", "veth", "peer", "name", outside)
        _ip("link", "set", inside, "netns", namespace)
        _ip("link", "set", outside, "master", self.bridge)
        _ip("link", "set", outside, "up")
        _ip("-n", namespace, "addr", "add", f"{address}/24", "dev", inside)
        _ip("-n", namespace, "link", "set", inside, "up")
        _ip("-n", namespace, "link", "set", "lo", "up")
        return address, namespace, outside

    def remove(self) -> None:
        if not self.isolated:
            return
        for namespace in self.namespaces:  # its end of each veth pair goes with it
            subprocess.run(["ip", "netns", "del", namespace], check=False, capture_output=True)
        subprocess.run(["ip", "link", "del", self.bridge], check=False, capture_output=True)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=GUARD_SECONDS)


def network() -> Network:
    """A network of hosts of its own: namespaces if this machine lets us make them."""
    key = os.getpid() * 8 + next(_networks) % 8  # this process's, then this network's
    tag = f"af{key % 1_000_000}"
    # A /24 of 10.0.0.0/8 of its own, far from the usual 10.0.x and 10.1.x.
    prefix = f"10.{200 + (key // 256) % 50}.{key % 256}"
    return Network(tag, prefix, isolated=_namespaces_work(tag))


def _namespaces_work(tag: str) -> bool:
    if sys.platform != "linux" or os.geteuid() != 0 or shutil.which("ip") is None:
        return False
    probe = f"{tag}-probe"
    made = subprocess.run(["ip", "netns", "add", probe], check=False, capture_output=True)
    subprocess.run(["ip", "netns", "del", probe], check=False, capture_output=True)
    return made.returncode == 0


@dataclass
class Host:
    """A machine of the layout: its address, its processes, and the faults that befall it."""

    name: str
    address: str
    namespace: str | None
    link: str | None
    logs: Path
    env: dict[str, str] = field(default_factory=dict)  # this host's own, over every process's
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def spawn(self, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        """Start ``argv`` on this host (a session of its own: ``freeze`` stops its children
        too), its output appended to ``<name>.log``."""
        env = {**env, **self.env}
        prefix = ["ip", "netns", "exec", self.namespace] if self.namespace else []
        with (self.logs / f"{self.name}.log").open("ab") as log:
            proc = subprocess.Popen(
                [*prefix, *argv],
                cwd=ROOT,  # as a deployment's project directory: the demo's MCP server is here
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.procs.append(proc)
        return proc

    def freeze(self) -> None:
        """SIGSTOP every process of the host, as a VM paused: nothing runs, sockets stay open."""
        self._signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self._signal(signal.SIGCONT)

    def cut(self) -> None:
        """Cut the host off the network (from PostgreSQL, Redis and the test alike): packets
        are dropped, nothing is refused, as across a partition."""
        if self.link is None:
            pytest.skip("no network namespaces on this machine (root on Linux is needed)")
        _ip("link", "set", self.link, "down")

    def heal(self) -> None:
        if self.link is not None:
            _ip("link", "set", self.link, "up")

    def alive(self) -> bool:
        return all(proc.poll() is None for proc in self.procs)

    def pids(self) -> set[int]:
        """Every process of the host now: its processes and their children (each of the
        host's processes leads a process group)."""
        groups = {proc.pid for proc in self.procs}
        found = set()
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(ProcessLookupError):
                    if os.getpgid(int(entry.name)) in groups:
                        found.add(int(entry.name))
        return found

    def stop(self) -> None:
        self.thaw()
        self.heal()
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def _signal(self, number: signal.Signals) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, number)

    def log(self) -> str:
        return (self.logs / f"{self.name}.log").read_text(errors="replace")


@dataclass
class Layout:
    """The running layout: its ``hosts`` by name."""

    postgres: Postgres
    redis: Redis
    network: Network
    database: str  # the test's own URL of the database (a unix socket: never cut)
    hosts: dict[str, Host]
    urls: dict[str, str]  # the HTTP servers' URLs, by host
    home: Path

    @property
    def web(self) -> str:
        return self.urls["web"]

    @property
    def streams(self) -> str:
        return self.urls["streams"]

    def rows(self, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.database) as conn:
            return conn.execute(statement, params).fetchall()

    def deliver(self, run_id: str, queue: str) -> None:
        """Put a step task for ``run_id`` on ``queue`` once more, as a broker redelivering one
        (the durable runner's own task, as ``DurableRunner.enqueue`` sends it)."""
        from celery import Celery

        app = Celery(broker=self.redis.url)
        try:
            app.send_task(STEP_TASK, args=[run_id, queue], queue=queue)
        finally:
            app.close()

    def alive(self) -> bool:
        return all(host.alive() for host in self.hosts.values())

    def tail(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
            for p in sorted(self.home.glob("*.log"))
        )


# The order every layout's runs refund.
SHOP = (
    "from demo.models import Order;"
    " Order.objects.create(pk='A-1001', customer_email='maria@example.com', total=100000)"
)


@contextlib.contextmanager
def layout_home() -> Iterator[Path]:
    """A directory for a layout's data and logs, removed after."""
    # Not pytest's temporary directories: another pytest run on the machine may prune them.
    home = Path(tempfile.mkdtemp(prefix="airlock-layout-"))
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


@contextlib.contextmanager
def running_layout(
    home: Path, hosts_env: Mapping[str, Mapping[str, str]] | None = None, **extra: str
) -> Iterator[Layout]:
    """The durable runner's layout under ``home``: hosts ``web`` (gunicorn), ``streams``
    (uvicorn), ``w1`` and ``w2`` (Celery workers, two processes each) and ``beat`` (``extra``:
    more environment for every process: tool delays, ...; ``hosts_env``: more for one host's
    processes by its name, such as a skewed clock); stopped and removed after."""
    names = ("web", "streams", "w1", "w2", "beat")
    with _services(home, names, hosts_env, AGENT_RUNNER="durable", **extra) as (layout, env):
        _gunicorn(layout, "web", env)
        _uvicorn(layout, "streams", env)
        for name in ("w1", "w2"):
            layout.hosts[name].spawn(
                [
                    *(sys.executable, "-m", "celery", "-A", "config", "worker"),
                    *("-Q", "agent.llm,agent.tool", "--concurrency", "2", "-n", f"{name}@faults"),
                    *("-l", "info", "--without-gossip", "--without-mingle"),
                ],
                env,
            )
        layout.hosts["beat"].spawn(
            [
                *(sys.executable, "-m", "celery", "-A", "config", "beat", "--max-interval", "1"),
                *("--schedule", str(home / "beat-schedule")),
            ],
            env,
        )
        _wait_until_up(layout)
        for name in ("w1", "w2"):
            _until_logged(layout, name, f"{name}@faults ready")
        yield layout


@contextlib.contextmanager
def running_inline_layout(home: Path, **extra: str) -> Iterator[Layout]:
    """The inline runner's layout under ``home``: hosts ``web`` and ``web2`` (gunicorn, each
    driving the runs it dispatches and sweeping for the other) and ``streams`` (uvicorn)."""
    with _services(home, ("web", "web2", "streams"), None, AGENT_RUNNER="inline", **extra) as (
        layout,
        env,
    ):
        for name in ("web", "web2"):
            _gunicorn(layout, name, env)
        _uvicorn(layout, "streams", env)
        _wait_until_up(layout)
        yield layout


@contextlib.contextmanager
def _services(
    home: Path,
    names: tuple[str, ...],
    hosts_env: Mapping[str, Mapping[str, str]] | None,
    **extra: str,
) -> Iterator[tuple[Layout, dict[str, str]]]:
    """PostgreSQL, Redis and a host per name (with its own environment from ``hosts_env``), none
    of them running anything yet; the layout and the environment of its processes. Everything
    stopped and removed after."""
    net = network()
    net.create()
    postgres: Postgres | None = None
    redis: Redis | None = None
    hosts: dict[str, Host] = {}
    try:
        postgres = start_postgres(home / "pg")
        if net.isolated:
            postgres.listen(net.hub, f"{net.prefix}.0/24")
        redis = start_redis(home, net.hub)
        local = migrated_database(postgres, "airlock_faults")
        shop = manage("shell", "--no-imports", "-c", SHOP, DATABASE_URL=local)
        assert shop.returncode == 0, shop.stderr
        for index, name in enumerate(names, start=1):
            address, namespace, link = net.add_host(index, name)
            own = dict((hosts_env or {}).get(name, {}))
            hosts[name] = Host(name, address, namespace, link, home, own)
        env = django_env(
            DJANGO_SETTINGS_MODULE="tests.live.settings",
            DATABASE_URL=postgres.tcp_url("airlock_faults", net.hub) if net.isolated else local,
            REDIS_URL=redis.url,
            CONN_MAX_AGE="60",  # persistent connections: they must survive a restart
            AIRLOCK_TEST_LEASE_SECONDS=str(LEASE),
            AIRLOCK_SWEEP_SECONDS=str(SWEEP),
            AIRLOCK_TEST_IDLE_IN_TRANSACTION_SECONDS=str(IDLE),
            ALLOWED_HOSTS=",".join(
                ["localhost", "127.0.0.1", *(h.address for h in hosts.values())]
            ),
            **extra,
        )
        yield Layout(postgres, redis, net, local, hosts, {}, home), env
    finally:
        for host in hosts.values():
            host.stop()
        if redis is not None:
            redis.stop()
        if postgres is not None:
            postgres.stop()
        net.remove()


def _gunicorn(layout: Layout, name: str, env: dict[str, str]) -> None:
    host = layout.hosts[name]
    port = _port(host)
    host.spawn(
        [
            str(BIN / "gunicorn"),
            *("config.wsgi", "-c", "python:agent_core.gunicorn"),
            *("--workers", "2", "--threads", "4", "--bind", f"{host.address}:{port}"),
        ],
        env,
    )
    layout.urls[name] = f"http://{host.address}:{port}"


def _uvicorn(layout: Layout, name: str, env: dict[str, str]) -> None:
    host = layout.hosts[name]
    port = _port(host)
    host.spawn(
        [
            *(str(BIN / "uvicorn"), "config.asgi:application"),
            *("--host", host.address, "--port", str(port), "--no-access-log"),
        ],
        env,
    )
    layout.urls[name] = f"http://{host.address}:{port}"


def _port(host: Host) -> int:
    """A free port: on the host's own address nothing else listens, on 127.0.0.1 ask."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1" if host.namespace is None else "", 0))
        return int(sock.getsockname()[1])


def _wait_until_up(layout: Layout) -> None:
    """Until every HTTP server of the layout answers."""
    deadline = time.monotonic() + GUARD_SECONDS * 2
    for url in layout.urls.values():
        while True:
            try:
                httpx.get(f"{url}/agent/runs", timeout=30)  # 401 without an actor: it answers
                break
            except httpx.TransportError:
                assert layout.alive(), layout.tail()
                assert time.monotonic() < deadline, f"{url} did not start\n{layout.tail()}"
                time.sleep(0.2)


def _until_logged(layout: Layout, name: str, line: str) -> None:
    deadline = time.monotonic() + GUARD_SECONDS * 2
    while line not in layout.hosts[name].log():
        assert layout.alive(), layout.tail()
        assert time.monotonic() < deadline, f"{name} did not start\n{layout.tail()}"
        time.sleep(0.2)
