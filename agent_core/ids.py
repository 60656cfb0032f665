"""Server-minted ids: a short prefix and a ULID, opaque and URL-safe (``run_01J…``)."""

from __future__ import annotations

from ulid import ULID


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
