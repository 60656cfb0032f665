"""Template helpers of the console: times relative and absolute, people, JSON, durations."""

from __future__ import annotations

import functools
import json
from datetime import datetime, timedelta
from html import escape
from typing import Any

from django import template
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe
from django.utils.timesince import TIME_STRINGS, timesince, timeuntil
from django.utils.translation import get_language

from console.bidi import visible
from console.conf import console_settings
from console.consumers import PRESENCE_SECONDS
from console.people import name_of

register = template.Library()

LARGE_JSON_LINES = 12  # longer arguments start collapsed (never truncated)


@register.filter
def when(value: datetime | None) -> SafeString | str:
    """``<time>`` showing "3 minutes ago" / "in 5 minutes", the absolute time as its title."""
    if value is None:
        return "—"
    now, units = timezone.now(), _units(get_language())
    if value <= now:
        relative = f"{timesince(value, now, time_strings=units)} ago"
    else:
        relative = f"in {timeuntil(value, now, time_strings=units)}"
    relative = relative.replace("\xa0", " ")  # timesince's non-breaking spaces
    absolute = timezone.localtime(value).strftime("%Y-%m-%d %H:%M:%S %Z")
    # What format_html made of it, without its per-argument lazy-string checks (an inbox page
    # has fifty of these): every part is a plain str, escaped here.
    return mark_safe(
        f'<time datetime="{escape(value.isoformat())}" title="{escape(absolute)}" data-relative>'
        f"{escape(relative)}</time>"
    )


class _Unit:
    """One of ``timesince``'s units ("%(num)d minute" / "…minutes") in one language: Django's
    own lazy plural, translated once per number instead of on every call (the translation
    lookups were half of ``timesince``'s time on an inbox page).

    Only numbers below ``KEPT_BELOW`` are kept: every unit but years stays below it (59 minutes,
    23 hours, 11 months), and a count of years past it is translated each time rather than kept
    for good.
    """

    KEPT_BELOW = 60

    def __init__(self, unit: str) -> None:
        self.unit = unit
        self.said: dict[int, str] = {}

    def __mod__(self, values: dict[str, int]) -> str:
        number = values["num"]
        said = self.said.get(number)
        if said is None:
            said = str(TIME_STRINGS[self.unit] % values)
            if number < self.KEPT_BELOW:  # two threads may both keep it: the same string
                self.said[number] = said
        return said


@functools.lru_cache(maxsize=64)
def _units(language: str | None) -> dict[str, Any]:
    """``timesince``'s units for ``language``, to be used only while it is the active one
    (``Any``: ``timesince`` takes whatever answers ``%``, as its own lazy plurals do; the stubs
    say ``str``)."""
    return {unit: _Unit(unit) for unit in TIME_STRINGS}


@register.filter
def person(ref: str) -> str:
    """An actor ref as a name."""
    return name_of(ref)


@register.filter
def pretty(value: Any) -> str:
    """JSON, indented, keys in their stored order; bidi controls shown (``bidi``)."""
    return visible(json.dumps(value, indent=2, ensure_ascii=False, default=str))


@register.filter
def compact(value: Any) -> str:
    """JSON on one line; bidi controls shown (``bidi``)."""
    return visible(json.dumps(value, ensure_ascii=False, default=str, separators=(", ", ": ")))


@register.filter(name="visible")
def visible_filter(value: Any) -> str:
    """Text shown with its bidi controls as visible tokens (``console.bidi``)."""
    return visible(str(value))


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


@register.simple_tag
def undo_seconds() -> int:
    """How long a console decision waits, with an Undo, before it is sent."""
    return console_settings().UNDO_SECONDS


@register.simple_tag
def presence_seconds() -> int:
    """How long a card's viewer is shown without a fresh word from their page; 0 when the
    deployment turned presence off (the page then says nothing of the cards it has open)."""
    return PRESENCE_SECONDS if console_settings().PRESENCE else 0
