from __future__ import annotations

from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "console"
    verbose_name = "Operators' console"

    def ready(self) -> None:
        from . import (
            checks,  # noqa: F401  (its checks register themselves)
            receivers,
        )

        receivers.connect()
