from __future__ import annotations

from django.apps import AppConfig


class AgentCoreConfig(AppConfig):
    name = "agent_core"
    verbose_name = "Agent core"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created
        from django.urls import register_converter

        from . import (
            checks,  # noqa: F401  (registers the system checks)
            mcp_checks,  # noqa: F401  (and those of the MCP servers)
        )
        from .engine.sessions import open_session
        from .ids import IdConverter
        from .tracing import connect

        # ``<airlock_id:run_id>`` in the API's and the console's URLs (see ids.IdConverter).
        register_converter(IdConverter, "airlock_id")
        connect()
        # Each connection's timeouts and the database's clock (SPEC §20).
        connection_created.connect(open_session, dispatch_uid="airlock-session")
