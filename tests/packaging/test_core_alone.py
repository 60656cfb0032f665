"""``agent_core`` installs and runs alone: a project whose INSTALLED_APPS hold agent_core and its
dependencies only (no ``approvals``, no ``console``) passes ``check`` (warning that its agent's
action tools will be refused), migrates, and runs an agent: its read call runs, and its action
call is refused by the core's own gate, since nobody could approve it
(``agent_core.gate.RefuseActions``). ``approvals`` is never even imported."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.packaging.project import REPO, run
from tests.processes import project_env

SETTINGS = """
import os

SECRET_KEY = "core-alone"
DEBUG = True
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "channels",
    "agent_core",
]
DATABASES = {
    "default": {"ENGINE": "django.db.backends.postgresql", "NAME": os.environ["PGDATABASE"]}
}
REDIS_URL = os.environ["REDIS_URL"]
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": None}]},
    }
}
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
}
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True}]
ROOT_URLCONF = "core_urls"
STATIC_URL = "static/"
ASGI_APPLICATION = "core_asgi.application"
SPECTACULAR_SETTINGS = {
    "DEFAULT_GENERATOR_CLASS": "agent_core.api.generator.AirlockSchemaGenerator",
}
AGENT = {"AGENTS": ["core_agents.shop"], "MODEL": "scripted:demo", "RUNNER": "inline"}
"""

URLS = """
from django.urls import include, path

urlpatterns = [path("agent/", include("agent_core.api.urls"))]
"""

ASGI = """
from django.core.asgi import get_asgi_application

from agent_core.asgi import with_airlock

application = with_airlock(get_asgi_application())
"""

AGENTS = '''
from agent_core.agents import Agent
from agent_core.tools import ToolContext, tool


@tool(kind="read")
def look(ctx: ToolContext, item: str) -> dict:
    """Look an item up."""
    return {"item": item, "in_stock": True}


@tool(kind="action")
def ship(ctx: ToolContext, item: str) -> dict:
    """Ship an item."""
    raise AssertionError("an action ran with no approval app installed")


shop = Agent(name="shop", tools=(look, ship))
'''

# One turn that calls the read and the action, driven by this process's inline runner.
DRIVE = """
import json
import sys

import django

django.setup()

from agent_core.conversation import turns
from agent_core.actors import Actor
from agent_core.cli.session import finish_driving
from agent_core.models import ToolCall

message = '/call look {"item": "tea"}\\n/call ship {"item": "tea"}'
run = turns.start_turn(agent="shop", message=message, actor=Actor(ref="user:1"))
finish_driving(run.pk)
run.refresh_from_db()
calls = ToolCall.objects.filter(run=run).order_by("position")
print(json.dumps({
    "status": run.status,
    "calls": [[c.tool_name, c.status, c.reason] for c in calls],
    "approvals_imported": any(m.split(".")[0] == "approvals" for m in sys.modules),
}))
"""


@pytest.fixture
def project(tmp_path: Path, database: str) -> dict[str, str]:
    """The core-only project's modules in ``tmp_path``; the environment that runs them."""
    for name, code in {
        "core_settings": SETTINGS,
        "core_urls": URLS,
        "core_asgi": ASGI,
        "core_agents": AGENTS,
        "drive": DRIVE,
    }.items():
        (tmp_path / f"{name}.py").write_text(code)
    return project_env(
        tmp_path,
        database,
        PYTHONPATH=f"{tmp_path}{os.pathsep}{REPO}",
        DJANGO_SETTINGS_MODULE="core_settings",
    )


def test_agent_core_alone_passes_check_and_refuses_action_calls(project, tmp_path):
    manage = [sys.executable, "-m", "django"]
    checked = run(*manage, "check", cwd=tmp_path, env=project)
    warnings = [line for line in checked.stderr.splitlines() if line.startswith("?: (")]
    assert [w.split()[1] for w in warnings] == ["(agent_core.W013)"], checked.stderr
    assert "the action tools of shop will be refused" in warnings[0]
    run(*manage, "migrate", "--noinput", cwd=tmp_path, env=project)
    done = run(sys.executable, "drive.py", cwd=tmp_path, env=project)
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["status"] == "completed"
    [look, ship] = outcome["calls"]
    assert look[:2] == ["look", "succeeded"]
    assert ship[:2] == ["ship", "refused"] and "No approval app is installed" in ship[2]
    assert outcome["approvals_imported"] is False
