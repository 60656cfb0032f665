from __future__ import annotations

from django.apps import AppConfig


class AgentCoreConfig(AppConfig):
    name = "agent_core"
    verbose_name = "Agent core"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)
        from .tracing import connect

        connect()
