"""Template helpers of the console: times relative and absolute, people, JSON, durations."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.timesince import timesince, timeuntil

from console.people import name_of

register = template.Library()

LARGE_JSON_LINES = 12  # longer arguments start collapsed (never truncated)


@register.filter
def when(value: datetime | None) -> SafeString | str:
    """``<time>`` showing "3 minutes ago" / "in 5 minutes", the absolute time as its title."""
    if value is None:
        return "—"
    now = timezone.now()
    relative = f"{timesince(value, now)} ago" if value <= now else f"in {timeuntil(value, now)}"
    absolute = timezone.localtime(value).strftime("%Y-%m-%d %H:%M:%S %Z")
    return format_html(
        '<time datetime="{}" title="{}" data-relative>{}</time>',
        value.isoformat(),
        absolute,
        relative.replace("\xa0", " "),
    )


@register.filter
def person(ref: str) -> str:
    """An actor ref as a name."""
    return name_of(ref)


@register.filter
def pretty(value: Any) -> str:
    """JSON, indented, keys in their stored order."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


@register.filter
def compact(value: Any) -> str:
    """JSON on one line."""
    return json.dumps(value, ensure_ascii=False, default=str, separators=(", ", ": "))


@register.filter
def is_large(value: Any) -> bool:
    """Whether the pretty JSON of ``value`` is long enough to start collapsed."""
    return pretty(value).count("\n") + 1 > LARGE_JSON_LINES


@register.filter
def duration(value: timedelta | None) -> str:
    """A short duration: ``850 ms``, ``4.2 s``, ``3 min 10 s``, ``2 h 5 min``."""
    if value is None:
        return "—"
    seconds = value.total_seconds()
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60)} s"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60)} min"


@register.filter
def percent(value: float | None) -> str:
    """A ratio as a percentage, ``—`` when there is nothing to divide."""
    return "—" if value is None else f"{value * 100:.1f}%"


@register.filter
def get(mapping: dict[str, Any], key: str) -> Any:
    """``mapping[key]`` in a template (``None`` when missing)."""
    return mapping.get(key)
