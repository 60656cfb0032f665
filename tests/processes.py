"""The environment of every process a test starts (``django_env``: this repository's; or
``project_env``: a project built from scratch), and ``manage.py`` run in real subprocesses against
the test database, with or without a pty."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import termios
from pathlib import Path
from urllib.parse import quote

from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent
MANAGE = (sys.executable, str(ROOT / "manage.py"))
# A guard against a hung child, not a timing assertion: every wait ends well before it.
GUARD_SECONDS = 60


def database_url() -> str:
    """The URL of the database this test run uses (pytest-django's test database)."""
    db = settings.DATABASES["default"]
    host = db.get("HOST") or db.get("OPTIONS", {}).get("host") or ""
    auth = quote(str(db.get("USER") or ""), safe="")
    if db.get("PASSWORD"):
        auth += ":" + quote(str(db["PASSWORD"]), safe="")
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return f"postgres://{auth}@{quote(str(host), safe='')}{port}/{db['NAME']}"


def django_env(**extra: str) -> dict[str, str]:
    """The environment of a process a test starts (a worker, a server, the CLI): this repository
    importable, the test settings, this run's test database and Redis, the inline runner;
    ``extra`` on top (``DJANGO_SETTINGS_MODULE``, ``AGENT_RUNNER``, ``AIRLOCK_TEST_*``, ...)."""
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database_url(),
        REDIS_URL=settings.REDIS_URL,
        DJANGO_SETTINGS_MODULE="tests.settings",
        AGENT_RUNNER="inline",
        PYTHONPATH=str(ROOT),
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


def project_env(home: Path, database: str, **extra: str) -> dict[str, str]:
    """The environment of a process of a project a test builds from scratch (the packaging
    tests): nothing of this repository's, only ``PATH``, libpq's ``PG*`` naming ``database`` on
    this run's server, and this run's Redis; ``extra`` on top."""
    db = settings.DATABASES["default"]
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "PGHOST": str(db["HOST"]),
        "PGPORT": str(db["PORT"] or 5432),
        "PGUSER": str(db["USER"]),
        "PGDATABASE": database,
        "REDIS_URL": settings.REDIS_URL,
        "PYTHONUNBUFFERED": "1",
    }
    if db["PASSWORD"]:
        env["PGPASSWORD"] = str(db["PASSWORD"])
    return {**env, **extra}


def manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``manage.py <args>`` to completion (``env``: extra environment); its exit status and
    output."""
    return subprocess.run(
        [*MANAGE, *args],
        cwd=ROOT,
        env=django_env(**env),
        capture_output=True,
        text=True,
        timeout=GUARD_SECONDS,
        check=False,
    )


class Terminal:
    """``manage.py <args>`` on a pseudo-terminal, driven like a person would (input not echoed)."""

    def __init__(self, *args: str) -> None:
        self.fd, child = pty.openpty()
        attrs = termios.tcgetattr(child)
        attrs[3] &= ~termios.ECHO  # lflag: what we type is not read back as output
        termios.tcsetattr(child, termios.TCSANOW, attrs)
        self.proc = subprocess.Popen(
            [*MANAGE, *args],
            cwd=ROOT,
            env=django_env(),
            stdin=child,
            stdout=child,
            stderr=child,
            start_new_session=True,
        )
        os.close(child)
        self.output = ""  # everything read so far
        self._unread = 0  # where the next ``expect`` starts looking

    def expect(self, text: str) -> str:
        """Read until ``text`` appears; return the output up to and including it."""
        deadline = GUARD_SECONDS
        while text not in self.output[self._unread :]:
            ready, _, _ = select.select([self.fd], [], [], 1.0)
            if not ready:
                deadline -= 1
                assert deadline > 0, f"never saw {text!r}; output so far:\n{self.output}"
                continue
            try:
                chunk = os.read(self.fd, 4096)
            except OSError:
                chunk = b""
            assert chunk, f"the process ended before {text!r}; output:\n{self.output}"
            self.output += chunk.decode(errors="replace").replace("\r\n", "\n")
        end = self.output.index(text, self._unread) + len(text)
        seen, self._unread = self.output[self._unread : end], end
        return seen

    def send(self, line: str) -> None:
        os.write(self.fd, line.encode() + b"\n")

    def end_input(self) -> None:
        """Ctrl-D at the start of a line: the end of input, as a person leaving."""
        os.write(self.fd, b"\x04")

    def wait(self) -> int:
        try:
            while True:  # drain, or a child blocked writing to a full pty never exits
                ready, _, _ = select.select([self.fd], [], [], 0.2)
                if ready:
                    try:
                        if not os.read(self.fd, 4096):
                            break
                    except OSError:
                        break
                elif self.proc.poll() is not None:
                    break
            return self.proc.wait(timeout=GUARD_SECONDS)
        finally:
            os.close(self.fd)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
