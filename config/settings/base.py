"""Settings shared by every environment; services come from DATABASE_URL and REDIS_URL."""

from __future__ import annotations

import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent.parent

SECRET_KEY = os.environ.get("SECRET_KEY", "")
DEBUG = os.environ.get("DEBUG", "0") == "1"
ALLOWED_HOSTS = [h for h in os.environ.get("ALLOWED_HOSTS", "localhost,127.0.0.1").split(",") if h]

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "axes",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "agent_core",
    "approvals",
    "console",
    "demo",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # A view that finds PostgreSQL or Redis away answers 503 + Retry-After, not a 500.
    "agent_core.middleware.ServiceUnavailableMiddleware",
    "axes.middleware.AxesMiddleware",  # last: turns a locked-out sign-in into the lockout page
]

# Password guessing on the console's (and admin's) login: django-axes counts failures per
# username and client address in the database (shared by every process) and locks that pair
# out for a while; a correct password before the limit resets the count.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = 5
AXES_COOLOFF_TIME = timedelta(minutes=15)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "console/locked_out.html"

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# Persistent connections, checked before reuse (README, "Run it in production"): a web worker's
# thread and a Celery worker keep theirs instead of connecting for every request or task; a
# stream's reads close theirs (agent_core.streams.live.read). CONN_MAX_AGE=0: one per request.
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/airlock"),
        conn_max_age=int(os.environ.get("CONN_MAX_AGE", "60")),
        conn_health_checks=True,
    )
}
# Server-side binding with prepared statements for every query (``DATABASE_PREPARED=1``): psycopg
# sends the parameters apart from the statement (no quoting them into its text in Python) and
# prepares a statement once a connection has run it twice (psycopg's ``prepare_threshold``
# counts the runs before the one that prepares), so PostgreSQL parses and plans each once per
# connection (bench/README.md, "Prepared statements"; docs/howto/prepared-statements.md). Off by
# default: a pooler in transaction mode that cannot keep prepared statements (PgBouncer before
# 1.21) breaks.
if os.environ.get("DATABASE_PREPARED") == "1":
    DATABASES["default"]["OPTIONS"] = {"server_side_binding": True, "prepare_threshold": 2}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")

# Redis pub/sub: a group message is one PUBLISH, which Redis hands to every process subscribed
# to the group (the core RedisChannelLayer spends two more round trips a send on a sorted set of
# members, one write per member, and twice the sender's CPU: bench/README.md, "Frames published").
# Messages are not kept while no one listens; a stream reads the table for what it missed.
# No socket read timeout on the layer's Redis connections: a listener waits on Redis for as long
# as its streams stay quiet (channels-redis takes a dict of connection-pool options per host).
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {
            "hosts": [{"address": REDIS_URL, "socket_timeout": None}],
            # Pub/sub ignores Redis db numbers: two deployments sharing a Redis need a prefix
            # each, or they see each other's frames (agent_core.W014 under check --deploy).
            "prefix": os.environ.get("CHANNEL_PREFIX", "airlock"),
        },
    }
}

# Airlock's queues, routes, prefetch and beat schedule come from with_airlock (config/celery.py).
CELERY_BROKER_URL = REDIS_URL
CELERY_TASK_ACKS_LATE = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Celery's Django fixup closes every database connection before and after each task unless this
# is set. The step tasks close stale connections themselves, as Django does around a request, so
# CONN_MAX_AGE decides whether a worker reuses its connection.
CELERY_DB_REUSE_MAX = 1000

AUTH_PASSWORD_VALIDATORS: list[dict[str, str]] = []

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# Shared by every process: the API's throttles count requests here (agent_core.api.throttles).
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
}

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
LOGIN_URL = "console:login"
LOGIN_REDIRECT_URL = "console:inbox"

# The operators' console (console/conf.py): who may open it besides staff users.
AIRLOCK_CONSOLE: dict[str, Any] = {"ROLES": ["operator"]}

# No REST_FRAMEWORK: the Airlock views carry their own DRF classes (AGENT["API_*"]).

SPECTACULAR_SETTINGS = {
    "TITLE": "Airlock API",
    "DESCRIPTION": "Durable human-in-the-loop approval for AI agents.",
    "VERSION": "0.1.0",
    # `manage.py spectacular` writes the SSE streams' operations, as the served schema does.
    "DEFAULT_GENERATOR_CLASS": "agent_core.api.generator.AirlockSchemaGenerator",
    "ENUM_NAME_OVERRIDES": {
        "RunStatusEnum": "agent_core.choices.RunStatus",
        "CallStatusEnum": "agent_core.choices.CallStatus",
    },
}

AGENT: dict[str, Any] = {
    "AGENTS": [
        "demo.agents.support_agent",
        "demo.agents.billing_agent",
        "demo.agents.legal_agent",
        "demo.agents.brand_agent",
        "demo.agents.campaign_review",
    ],
    "MODEL": "scripted:demo",
    "RUNNER": os.environ.get("AGENT_RUNNER", "inline"),
    # The demo's own MCP server (demo/mcp_server.py), started over stdio once per process.
    "MCP_SERVERS": {"warehouse": {"command": [sys.executable, "-m", "demo.mcp_server"]}},
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {"agent_core": {"handlers": ["console"], "level": "INFO"}},
}
