"""The installable package, tried as a new user would: build it, install the wheel into a fresh
virtualenv, ``startproject``, apply the first tutorial's file blocks (docs/tutorial/), migrate
against real PostgreSQL, and drive one approval cycle over HTTP with each runner."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import httpx
import pytest

from tests.conftest import wait_for
from tests.durable.conftest import Cluster, _flush_broker
from tests.live.conftest import read_all, start
from tests.live.server import Server, start_server
from tests.packaging.project import Dist, build, install, new_project, run
from tests.processes import project_env

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("packaging")


@pytest.fixture(scope="module")
def dist(workdir: Path) -> Dist:
    return build(workdir / "dist")


@pytest.fixture(scope="module")
def python(dist: Dist, workdir: Path) -> Path:
    """The fresh virtualenv's python, with only the wheel and its dependencies installed."""
    return install(dist.wheel, workdir / "venv")


@pytest.fixture(scope="module")
def project(python: Path, workdir: Path, database: str) -> Path:
    """``mysite`` made from the tutorial, migrated, with a user ``alice`` who has an API token."""
    where = new_project(python, workdir / "site")
    env = mysite_env(workdir, database)
    manage(python, where, env, "migrate", "--noinput")
    manage(
        python,
        where,
        {**env, "DJANGO_SUPERUSER_PASSWORD": "pw"},
        "createsuperuser",
        "--noinput",
        "--username",
        "alice",
        "--email",
        "alice@example.com",
    )
    return where


def mysite_env(workdir: Path, database: str, **extra: str) -> dict[str, str]:
    """Only what ``mysite``'s settings read (libpq's PG*, REDIS_URL) and where it logs parcels."""
    mysite = {
        "DJANGO_SETTINGS_MODULE": "mysite.settings",
        "PARCEL_LOG": str(workdir / "parcels.log"),
    }
    return project_env(workdir, database, **{**mysite, **extra})


def manage(python: Path, where: Path, env: dict[str, str], *args: str) -> str:
    return run(python, "manage.py", *args, cwd=where, env=env).stdout


def token(python: Path, where: Path, env: dict[str, str]) -> str:
    out = manage(python, where, env, "drf_create_token", "alice")  # "Generated token <key> …"
    return out.split()[2]


def one_cycle(server: Server, key: str, parcel: str) -> None:
    """chat -> pending -> approve -> the stream's ``done``."""
    alice = {"Authorization": f"Token {key}"}
    with httpx.Client(base_url=server.url, timeout=60) as client:
        run_id = start(client, f'/call ship_parcel {{"parcel": "{parcel}"}}', alice)["run_id"]

        def pending() -> str | None:
            rows = client.get("/agent/approvals/pending", headers=alice).json()["results"]
            return next((r["tool_call_id"] for r in rows if r["run_id"] == run_id), None)

        call_id = wait_for("the call to wait for approval", pending)
        approved = client.post(
            "/agent/tool-call/approve", json={"tool_call_id": call_id}, headers=alice
        )
        assert approved.status_code == 200 and approved.json()["outcome"] == "applied"
        frames = read_all(client, run_id, alice)
        assert frames[-1].event == "done", frames[-1]


def shipped(workdir: Path) -> list[str]:
    log = workdir / "parcels.log"
    return [line.split()[0] for line in log.read_text().splitlines()] if log.exists() else []


def test_the_wheel_and_the_sdist_pass_twine_and_hold_the_apps_only(dist: Dist):
    run(sys.executable, "-m", "twine", "check", "--strict", dist.wheel, dist.sdist)
    names = zipfile.ZipFile(dist.wheel).namelist()
    for needed in (
        "agent_core/migrations/0001_initial.py",
        # agent_core's sub-packages (found by setuptools' `agent_core*`, not listed one by one)
        "agent_core/engine/sql.py",
        "agent_core/toolcalls/proposals.py",
        "agent_core/streams/sse.py",
        "agent_core/conversation/turns.py",
        "agent_core/runner/loop.py",
        "approvals/migrations/0001_initial.py",
        "console/templates/console/base.html",
        "console/static/console/console.js",
        "approvals/management/commands/agent.py",
    ):
        assert needed in names
    tops = {name.split("/")[0] for name in names}
    assert tops == {"agent_core", "approvals", "console", "django_airlock-0.1.0.dist-info"}
    assert "django_airlock-0.1.0.dist-info/licenses/LICENSE" in names
    metadata = zipfile.ZipFile(dist.wheel).read("django_airlock-0.1.0.dist-info/METADATA")
    assert b"License-Expression: MIT" in metadata
    assert b"Provides-Extra: openai" in metadata and b"dj-database-url" not in metadata


def test_an_approval_cycle_with_the_inline_runner(python, project, workdir, database):
    env = mysite_env(workdir, database, AIRLOCK_RUNNER="inline")
    assert "no issues" in manage(python, project, env, "check")
    server = start_server(
        workdir / "inline.log",
        python=str(python),
        app="mysite.asgi:application",
        cwd=project,
        env=env,
    )
    try:
        one_cycle(server, token(python, project, env), "inline-1")
        # Static files under daphne (DEBUG, as startproject sets it), and the console's pages.
        assert httpx.get(f"{server.url}/static/console/console.js").status_code == 200
        assert httpx.get(f"{server.url}/console/login/").status_code == 200
    finally:
        server.stop()
    assert shipped(workdir) == ["inline-1"]


def test_an_approval_cycle_with_the_durable_runner(python, project, workdir, database):
    env = mysite_env(workdir, database, AIRLOCK_RUNNER="durable")
    assert "no issues" in manage(python, project, env, "check")
    _flush_broker()
    celery = Cluster(workdir / "celery", python=str(python), app="mysite", cwd=project, env=env)
    celery.tmp.mkdir(exist_ok=True)
    celery.worker()
    beat = celery.beat()
    server = start_server(
        workdir / "durable.log",
        python=str(python),
        app="mysite.asgi:application",
        cwd=project,
        env=env,
    )
    try:
        one_cycle(server, token(python, project, env), "durable-1")
        # The sweeper is on the beat schedule that with_airlock added.
        wait_for("beat to send the sweep", lambda: "airlock.sweep" in celery.log_of(beat), celery)
    finally:
        server.stop()
        celery.stop_all()
    assert shipped(workdir) == ["inline-1", "durable-1"]


@pytest.mark.parametrize(
    ("change", "check_id"),
    [
        ("del CHANNEL_LAYERS", "agent_core.E006"),
        (
            'DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": "x.db"}}',
            "agent_core.E005",
        ),
    ],
)
def test_check_fails_on_a_missing_piece(python, project, workdir, database, change, check_id):
    (project / "mysite" / "broken.py").write_text(f"from .settings import *\n\n{change}\n")
    env = mysite_env(workdir, database, DJANGO_SETTINGS_MODULE="mysite.broken")
    done = subprocess.run(
        [str(python), "manage.py", "check"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1 and check_id in done.stderr, done.stderr
