"""What PostgreSQL's ``jsonb`` and text columns cannot store, found before it reaches them.

A NUL character (``\\u0000``) is valid JSON but refused by PostgreSQL, a lone surrogate
(``\\ud800``) is valid JSON but no UTF-8 text, and a deeply nested document overflows Python's
recursion on the way in or out. Request bodies, form input and
model-proposed arguments are all checked here, so each surface refuses them the same way.
"""

from __future__ import annotations

import re
from typing import Any

MAX_DEPTH = 64  # far deeper than any tool's arguments; a guard against recursion, not a style
NUL = "\x00"
# Half of a UTF-16 pair alone: JSON's "\ud800" decodes to one, which nothing can encode.
SURROGATE = re.compile("[\ud800-\udfff]")


def problem(value: Any, *, max_depth: int = MAX_DEPTH) -> str | None:
    """Why ``value`` cannot be stored (a NUL character, a lone surrogate, nesting over
    ``max_depth``), or None."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if (said := text_problem(item)) is not None:
                return said
            continue
        if isinstance(item, dict | list):
            if depth > max_depth:
                return f"the JSON is nested deeper than {max_depth} levels"
            if isinstance(item, dict):
                stack.extend((key, depth) for key in item)
                stack.extend((child, depth + 1) for child in item.values())
            else:
                stack.extend((child, depth + 1) for child in item)
    return None


def text_problem(text: str) -> str | None:
    """Why the string ``text`` cannot be stored (a NUL character, a lone surrogate), or None."""
    if NUL in text:
        return "a string contains a NUL character (\\u0000)"
    if SURROGATE.search(text):
        return "a string contains a lone surrogate (\\ud800-\\udfff), which is not text"
    return None
