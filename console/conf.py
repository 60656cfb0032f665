"""The ``AIRLOCK_CONSOLE`` settings dict: who may open the console, how long lists are."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver


@dataclass(frozen=True, kw_only=True)
class ConsoleSettings:
    """Every key of ``settings.AIRLOCK_CONSOLE`` with its default; an unknown key is a TypeError."""

    # Group names whose members open the operators' pages (staff users always may); any logged-in
    # user opens the inbox, a call's card and My requests (console/access.py).
    ROLES: tuple[str, ...] = ("operator",)
    # Rows per page of the runs, audit and notifications lists (`?page_size=` up to 200).
    PAGE_SIZE: int = 50
    # Days of runs the metrics page counts (its approvals' numbers: APPROVALS["ANALYTICS_WINDOW"]).
    METRICS_DAYS: int = 14
    # Seconds a decision made in the console waits, with an Undo, before it is sent (0: at once).
    UNDO_SECONDS: int = 5
    # Group names whose members see the approval analytics on the metrics page (time to decision
    # by approver, rubber stamps per person); superusers always do.
    ANALYTICS_ROLES: tuple[str, ...] = ("operator",)
    # Whether a card someone else has open says so ("fiona is viewing"), over the console's
    # WebSocket, to those who may see the call; False: nobody is told who looks at what.
    PRESENCE: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "ROLES", tuple(self.ROLES))
        object.__setattr__(self, "ANALYTICS_ROLES", tuple(self.ANALYTICS_ROLES))


@functools.cache
def console_settings() -> ConsoleSettings:
    """The current ``AIRLOCK_CONSOLE`` settings, cached until the setting changes."""
    raw: dict[str, Any] = dict(getattr(settings, "AIRLOCK_CONSOLE", {}))
    return ConsoleSettings(**raw)


@receiver(setting_changed)
def _reload(*, setting: str, **kwargs: Any) -> None:
    # override_settings(AIRLOCK_CONSOLE=...) in tests must be seen by the next call.
    if setting == "AIRLOCK_CONSOLE":
        console_settings.cache_clear()
