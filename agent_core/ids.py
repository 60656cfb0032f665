"""Server-minted ids: a short prefix and a ULID, opaque and URL-safe (``run_01J…``)."""

from __future__ import annotations

import re

from ulid import ULID

# What a server-minted id can look like, generously: any other path segment (a NUL, a slash
# encoded, a 10 KB string) matches no URL and answers 404 before any query sees it.
ID_REGEX = r"[A-Za-z0-9_-]{1,64}"
# The longest id a table stores (``max_length`` of the id columns and of the audit's).
MAX_ID_LENGTH = 40


class IdConverter:
    """The URL converter ``airlock_id``: a path segment that can be an id, unchanged."""

    regex = ID_REGEX

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


def is_id(text: str) -> bool:
    """Whether ``text`` could be a stored id (form input is checked before a query sees it)."""
    return len(text) <= MAX_ID_LENGTH and re.fullmatch(ID_REGEX, text) is not None


def new_id(prefix: str) -> str:
    """Return a fresh id such as ``tc_01JD3…``; sortable by creation time."""
    return f"{prefix}_{ULID()}"


def thread_id() -> str:
    return new_id("thr")


def run_id() -> str:
    return new_id("run")


def message_id() -> str:
    return new_id("msg")


def tool_call_id() -> str:
    return new_id("tc")


def queued_id() -> str:
    return new_id("qm")
