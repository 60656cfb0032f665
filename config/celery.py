"""The Celery app: configured from Django settings (``CELERY_*``), tasks autodiscovered.

Step tasks go to ``agent.llm`` / ``agent.tool``; the sweeper runs on beat every
``AGENT["SWEEP_SECONDS"]`` (and once when a worker starts, see ``agent_core.tasks``).
"""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.dev")

app = Celery("airlock")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_finalize.connect
def _schedule_sweep(sender: Celery, **kwargs: object) -> None:
    from agent_core.conf import agent_settings

    sender.add_periodic_task(
        float(agent_settings().SWEEP_SECONDS), sender.signature("agent_core.sweep"), name="sweep"
    )
