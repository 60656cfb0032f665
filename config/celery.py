"""The Celery app: configured from Django settings (``CELERY_*``), tasks autodiscovered, and
Airlock's queues, routes and beat schedule added by ``agent_core.celery.with_airlock``."""

from __future__ import annotations

import os

from celery import Celery

from agent_core.celery import with_airlock

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.dev")

app = Celery("airlock")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
with_airlock(app)
