"""Grants that only narrow: the scope of a remembered approval, and the calls it covers.

``remember`` may carry a ``Scope``: arg pins (a field's exact value, or a glob for a string),
a number of uses and a ttl. A grant covers a later call of its tool in its thread only when the
call's args match every pin, while it has uses left and is not past its ttl; each covered call
takes one use by one conditional ``UPDATE`` (the row count says whether it won), so concurrent
calls never use a grant more often than it allows. A scope is never wider than the call that was
approved: each pin must match that call's own args, and neither uses nor ttl may exceed a plain
grant's (``GrantWiderThanCall``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import timedelta
from fnmatch import fnmatchcase
from typing import Any

from django.db.models import F
from django.utils import timezone

from agent_core.actors import Actor
from agent_core.models import ToolCall

from .conf import approvals_settings
from .exceptions import GrantWiderThanCall, InvalidDecision
from .models import GrantUse, RememberedApproval

# The largest number of uses and the longest ttl (s) a scope may ask for.
MAX_USES = 1_000_000
MAX_TTL_SECONDS = 365 * 24 * 3600


@dataclass(frozen=True)
class Scope:
    """What a grant covers: calls whose args match every pin in ``args`` (a field's exact JSON
    value, or for a string a glob: ``*``, ``?``, ``[…]``), at most ``uses`` of them (``None``: any
    number), for ``ttl`` (``None``: a plain grant's, ``APPROVALS["REMEMBER_TTL"]``)."""

    args: dict[str, Any] = field(default_factory=dict)
    uses: int | None = None
    ttl: timedelta | None = None

    def as_dict(self) -> dict[str, Any]:
        """The scope as the API takes and shows it (``ttl`` in seconds)."""
        ttl = int(self.ttl.total_seconds()) if self.ttl is not None else None
        return {"args": self.args, "uses": self.uses, "ttl": ttl}


# ``remember=True``: the whole tool in the thread, as before scopes.
WHOLE_TOOL = Scope()


def scope_of(remember: bool | Scope) -> Scope | None:
    """The scope ``remember`` asks for (``None``: remember nothing)."""
    if isinstance(remember, Scope):
        return remember
    return WHOLE_TOOL if remember else None


def parse(data: Any) -> Scope:
    """A scope from its JSON form ``{"args": {...}, "uses": n, "ttl": seconds}`` (each key
    optional); a malformed one is refused with ``InvalidDecision``."""
    if not isinstance(data, dict):
        raise InvalidDecision('a scope is an object: {"args": {...}, "uses": n, "ttl": seconds}')
    unknown = set(data) - {"args", "uses", "ttl"}
    if unknown:
        raise InvalidDecision(f"a scope has no {', '.join(sorted(unknown))}")
    pins = data.get("args") or {}
    if not isinstance(pins, dict) or not all(isinstance(k, str) and k for k in pins):
        raise InvalidDecision("a scope's args are an object of field names to values or globs")
    uses = _bounded(data.get("uses"), "uses", MAX_USES)
    ttl = _bounded(data.get("ttl"), "ttl", MAX_TTL_SECONDS)
    return Scope(args=pins, uses=uses, ttl=timedelta(seconds=ttl) if ttl is not None else None)


def _bounded(value: Any, name: str, most: int) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= most:
        raise InvalidDecision(f"a scope's {name} is a whole number from 1 to {most}")
    return value


def matches(pins: dict[str, Any], args: dict[str, Any]) -> bool:
    """Whether ``args`` match every pin: a string pin is a glob on a string arg; any other pin,
    the arg's exact value. A pinned field the args lack matches nothing."""
    for name, pin in pins.items():
        if name not in args:
            return False
        value = args[name]
        if isinstance(pin, str) and isinstance(value, str):
            if not fnmatchcase(value, pin):
                return False
        elif pin != value:
            return False
    return True


def check_narrows(scope: Scope, tool_name: str, approved_args: dict[str, Any]) -> None:
    """Refuse a scope wider than the call approved with ``approved_args``."""
    wider = [name for name, pin in scope.args.items() if not matches({name: pin}, approved_args)]
    if wider:
        raise GrantWiderThanCall(
            f"the pins on {', '.join(sorted(wider))} do not match the approved call's args"
        )
    limit = approvals_settings().remember_ttl_for(tool_name)
    if scope.ttl is not None and limit is not None and scope.ttl > limit:
        raise GrantWiderThanCall(f"a grant of {tool_name} lasts at most {limit}")


def grant(call: ToolCall, actor: Actor, scope: Scope) -> RememberedApproval:
    """Remember ``actor``'s yes to ``call`` for the later calls of its tool in its thread that
    ``scope`` covers (checked with ``check_narrows`` first)."""
    ttl = scope.ttl or approvals_settings().remember_ttl_for(call.tool_name)
    return RememberedApproval.objects.create(
        thread_id=call.thread_id,
        tool_name=call.tool_name,
        granted_by_ref=actor.ref,
        source_tool_call=call,
        expires_at=timezone.now() + ttl if ttl else None,
        arg_pins=scope.args,
        uses=scope.uses,
        uses_left=scope.uses,
    )


def cover(call: ToolCall) -> str | None:
    """The granter of the newest active grant covering ``call`` (``None``: none does), one of
    its uses taken and the call recorded as covered by it; in the suspend transaction, so a call
    that is never stored gives its use back."""
    candidates = RememberedApproval.objects.active().filter(
        thread_id=call.thread_id, tool_name=call.tool_name
    )
    for found in candidates.order_by("-created_at", "-id"):
        if not matches(found.arg_pins, call.args) or not _take_use(found):
            continue
        GrantUse.objects.create(grant=found, tool_call_id=call.pk, at=timezone.now())
        return found.granted_by_ref
    return None


def _take_use(found: RememberedApproval) -> bool:
    """One use of ``found``: always for a grant without a count; else one conditional
    ``UPDATE`` that only a grant with a use left (and still active) passes."""
    if found.uses_left is None:
        return True
    taken = (
        RememberedApproval.objects.active()
        .filter(pk=found.pk, uses_left__gt=0)
        .update(uses_left=F("uses_left") - 1)
    )
    return taken == 1


def scope_as_granted(found: RememberedApproval) -> Scope:
    """The scope ``found`` was granted with (its ttl from its creation to its expiry)."""
    ttl = found.expires_at - found.created_at if found.expires_at else None
    return Scope(args=found.arg_pins, uses=found.uses, ttl=ttl)


def from_form(pins: str, uses: str, ttl: str) -> Scope:
    """A scope from a link page's form fields (JSON pins, whole numbers; empty: no limit)."""
    try:
        data = {
            "args": json.loads(pins) if pins.strip() else {},
            "uses": int(uses) if uses.strip() else None,
            "ttl": int(ttl) if ttl.strip() else None,
        }
    except ValueError as exc:  # JSONDecodeError is one
        raise InvalidDecision(f"the scope's fields are not valid: {exc}") from exc
    return parse(data)
