"""The ``APPROVALS`` settings dict: approval rules, remembered-approval lifetime, notifications.

Read through ``approvals_settings()``. It, and whatever other module derives from it (the parsed
rules, the notification backends), is cached with ``per_settings`` until ``APPROVALS`` changes
(``override_settings(APPROVALS=...)``): those modules import this one, never the reverse.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

T = TypeVar("T")
_CACHES: list[Callable[[], Any]] = []  # each cached function's cache_clear


def per_settings(func: Callable[[], T]) -> Callable[[], T]:
    """Cache ``func``'s answer until the ``APPROVALS`` setting changes."""
    cached = functools.cache(func)
    _CACHES.append(cached.cache_clear)
    return cached


@dataclass(frozen=True, kw_only=True)
class ApprovalsSettings:
    """Every key of ``settings.APPROVALS`` with its default; an unknown key is a TypeError."""

    # tool name (or "*") -> one rule or a list of rules; see approvals/rules.py.
    RULES: dict[str, Any] = field(default_factory=dict)
    # How long a remembered approval lasts (seconds or timedelta); None: until revoked.
    REMEMBER_TTL: float | timedelta | None = timedelta(hours=8)
    # The same per tool name, for tools whose grants should last longer or shorter.
    REMEMBER_TTL_BY_TOOL: dict[str, float | timedelta | None] = field(default_factory=dict)
    # tool name (or "*") -> how far past now an extension may move a deadline (seconds or
    # timedelta); a tool without an entry: the ttl the policy gives the call.
    MAX_EXTENSION: dict[str, float | timedelta] = field(default_factory=dict)
    # Where approvers are told of a waiting call: dotted paths, or {"BACKEND": path, "OPTIONS":
    # {...}} dicts (approvals/notify/backends.py). Empty: nobody is notified.
    NOTIFICATION_BACKENDS: list[Any] = field(default_factory=list)
    # Attempts per delivery (the first included) and the base of its exponential backoff (s).
    NOTIFICATION_ATTEMPTS: int = 5
    NOTIFICATION_BACKOFF: float = 2.0  # seconds before the second attempt, doubling
    # How long one attempt may take (s) before another may start in its place: longer than a send
    # takes (a webhook's TIMEOUT), as an attempt whose process died is only known by its end.
    NOTIFICATION_LEASE: float = 60.0
    # How many lost deliveries one sweep schedules again at most (the most overdue first).
    NOTIFICATION_SWEEP_LIMIT: int = 100
    # The longest the sweep waits (s) before it queues a delivery again while none of the copies
    # it queued ran (a backed-up queue, or lost again): from a lease, the wait doubles up to this.
    NOTIFICATION_SWEEP_BACKOFF_MAX: float = 3600.0
    # Absolute URL of the site, for the links in notifications (e.g. "https://airlock.example").
    BASE_URL: str = ""
    # How long a signed approve / reject link in a notification stays usable (seconds).
    LINK_MAX_AGE: int = 24 * 3600
    # How many refused link pages (a bad, used or expired token) one client address may open
    # (DRF rate syntax, "30/min"; None: no limit). Past it: 429 ``throttled``.
    LINK_REFUSAL_RATE: str | None = "30/min"
    # An approval given faster than this (seconds from the request) counts as a rubber stamp in
    # the approval analytics.
    RUBBER_STAMP_SECONDS: float = 5.0
    # The approval analytics cover the requests of this last stretch (seconds or timedelta).
    ANALYTICS_WINDOW: float | timedelta = timedelta(days=14)
    # How often the sweep recomputes the approval analytics' snapshot (seconds or timedelta): the
    # metrics page and the OpenTelemetry gauges read the snapshot, so this is how stale they may
    # be. One refresh scans the window's calls (seconds at a million: bench/README.md).
    ANALYTICS_REFRESH: float | timedelta = timedelta(minutes=5)
    # How long before a pending call's deadline its approvers are reminded, once (seconds or
    # timedelta); None: no reminders. Sent by the sweep (``approvals.reminders``).
    REMIND_BEFORE: float | timedelta | None = None

    @property
    def remind_before(self) -> timedelta | None:
        return to_timedelta(self.REMIND_BEFORE, key="REMIND_BEFORE")

    @property
    def analytics_window(self) -> timedelta:
        return _required(self.ANALYTICS_WINDOW, key="ANALYTICS_WINDOW")

    @property
    def analytics_refresh(self) -> timedelta:
        return _required(self.ANALYTICS_REFRESH, key="ANALYTICS_REFRESH")

    # Text decisions (SPEC §17, agents with ``text_decisions=True``): per language, the whole
    # messages that approve, approve and remember, or reject the thread's pending call.
    TEXT_DECISIONS: dict[str, dict[str, list[str]]] = field(
        default_factory=lambda: {
            "en": {
                "approve": ["yes", "approve", "confirm"],
                "always": ["approve always", "yes always"],
                "reject": ["no", "reject", "cancel"],
            }
        }
    )

    @property
    def remember_ttl(self) -> timedelta | None:
        return to_timedelta(self.REMEMBER_TTL, key="REMEMBER_TTL")

    def max_extension(self, tool_name: str) -> timedelta | None:
        """The configured bound of ``tool_name``'s extensions (its own entry, else ``"*"``)."""
        value = self.MAX_EXTENSION.get(tool_name, self.MAX_EXTENSION.get("*"))
        return to_timedelta(value, key=f"MAX_EXTENSION[{tool_name!r}]")

    def remember_ttl_for(self, tool_name: str) -> timedelta | None:
        """How long a grant of ``tool_name`` lasts: its own entry, else ``REMEMBER_TTL``."""
        if tool_name in self.REMEMBER_TTL_BY_TOOL:
            value = self.REMEMBER_TTL_BY_TOOL[tool_name]
            return to_timedelta(value, key=f"REMEMBER_TTL_BY_TOOL[{tool_name!r}]")
        return self.remember_ttl


def to_timedelta(value: Any, *, key: str) -> timedelta | None:
    """A ttl given as seconds or a ``timedelta``; ``None`` means no expiry."""
    if value is None or isinstance(value, timedelta):
        ttl = value
    elif isinstance(value, int | float) and not isinstance(value, bool):
        ttl = timedelta(seconds=value)
    else:
        raise ValueError(f"{key} must be seconds or a timedelta, not {value!r}")
    if ttl is not None and ttl <= timedelta(0):
        raise ValueError(f"{key} must be positive, not {value!r}")
    return ttl


def _required(value: Any, *, key: str) -> timedelta:
    """A duration that may not be ``None`` (seconds or a ``timedelta``)."""
    ttl = to_timedelta(value, key=key)
    if ttl is None:
        raise ValueError(f"{key} must be seconds or a timedelta, not None")
    return ttl


@per_settings
def approvals_settings() -> ApprovalsSettings:
    """The current ``APPROVALS`` settings, parsed once and cached until the setting changes."""
    return ApprovalsSettings(**dict(getattr(settings, "APPROVALS", {})))


def absolute(path: str) -> str:
    """``path`` on the site named by ``APPROVALS["BASE_URL"]`` (as is without one)."""
    return approvals_settings().BASE_URL.rstrip("/") + path if path else ""


@receiver(setting_changed)
def _reload(*, setting: str, **kwargs: Any) -> None:
    if setting == "APPROVALS":
        for clear in _CACHES:
            clear()
