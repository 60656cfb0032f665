"""Edited arguments: what a decider changed, field by field, as the console shows it before the
decision and as the audit keeps it after."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .requirement import Requirement


@dataclass(frozen=True)
class Change:
    """One argument an edit changed (``None``: absent on that side)."""

    field: str
    before: Any
    after: Any


@dataclass(frozen=True)
class EditPreview:
    """An edit checked as the port would approve it, nothing decided: the validated args, what
    changed, and the policy's answer for the edited call."""

    args: dict[str, Any]
    changes: list[Change]
    requirement: Requirement


def changes(original: dict[str, Any], edited: dict[str, Any]) -> list[Change]:
    """The fields whose values differ, in name order."""
    return [
        Change(name, original.get(name), edited.get(name))
        for name in sorted(original.keys() | edited.keys())
        if original.get(name) != edited.get(name)
    ]


def describe(changed: list[Change]) -> str:
    """The audit's line for an edit: ``edited amount: 59.90 → 5000.00; reason: "" → "late"``."""
    if not changed:
        return "approved as asked (no argument changed)"
    return "edited " + "; ".join(
        f"{c.field}: {_shown(c.before)} → {_shown(c.after)}" for c in changed
    )


def _shown(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)
