"""Settings shared by every environment; services come from DATABASE_URL and REDIS_URL."""

from __future__ import annotations

import os
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
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
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
]

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

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/airlock"),
        conn_max_age=0,
    )
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [REDIS_URL]},
    }
}

CELERY_BROKER_URL = REDIS_URL
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Celery's Django fixup closes every database connection before and after each task unless this
# is set. The step tasks close stale connections themselves, as Django does around a request, so
# CONN_MAX_AGE decides whether a worker reuses its connection.
CELERY_DB_REUSE_MAX = 1000
# The durable runner: model steps and tool steps on their own queues (tool workers can live where
# the credentials are); the sweep goes with the model steps.
CELERY_TASK_ROUTES = {
    "agent_core.model_step": {"queue": "agent.llm"},
    "agent_core.tool_step": {"queue": "agent.tool"},
    "agent_core.sweep": {"queue": "agent.llm"},
    # Notifications leave the system like a tool's side effects do.
    "approvals.deliver_notification": {"queue": "agent.tool"},
}

AUTH_PASSWORD_VALIDATORS: list[dict[str, str]] = []

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
LOGIN_URL = "console:login"
LOGIN_REDIRECT_URL = "console:inbox"

# The operators' console (console/conf.py): who may open it besides staff users.
AIRLOCK_CONSOLE = {"ROLES": ["operator"]}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "agent_core.api.errors.exception_handler",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Airlock API",
    "DESCRIPTION": "Durable human-in-the-loop approval for AI agents.",
    "VERSION": "0.1.0",
    "ENUM_NAME_OVERRIDES": {
        "RunStatusEnum": "agent_core.models.RunStatus",
        "CallStatusEnum": "agent_core.models.CallStatus",
    },
}

AGENT: dict[str, Any] = {
    "AGENTS": ["demo.agents.support_agent"],
    "MODEL": "scripted:demo",
    "RUNNER": os.environ.get("AGENT_RUNNER", "inline"),
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {"agent_core": {"handlers": ["console"], "level": "INFO"}},
}
