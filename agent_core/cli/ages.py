"""Parsing ages such as ``30d`` for command-line options."""

from __future__ import annotations

import re
from datetime import timedelta

_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_AGE = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")


def parse_age(text: str) -> timedelta:
    """``90s``, ``45m``, ``12h``, ``30d`` or ``2w`` as a ``timedelta``; ``ValueError`` otherwise."""
    match = _AGE.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not an age like 30d, 12h, 45m, 90s or 2w")
    return timedelta(**{_UNITS[match[2]]: int(match[1])})
