"""What else concerns a call, for deciding it: the calls of its tool about the same thing
(``@tool(related_by=)``: the same order, the same customer), pending or decided, with their
amounts and their sum, and the pending calls that duplicate it (the same tool and args)."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from agent_core.actors import Actor
from agent_core.choices import CallStatus
from agent_core.engine.access import in_visible_runs
from agent_core.models import ToolCall
from agent_core.tools import ToolSpec

MAX_RELATED = 20  # a card lists the newest; the sum is of those it lists


@dataclass(frozen=True)
class Related:
    """The calls related to one call that its viewer may see, newest first."""

    calls: list[ToolCall] = field(default_factory=list)
    total: Decimal | None = None  # the sum of their amounts and the call's own, if any has one


@dataclass(frozen=True)
class Duplicates:
    """The pending calls of the same tool and args as a call, that its viewer may see: the
    oldest stands, the others may be rejected as its duplicates."""

    oldest: str = ""
    others: list[str] = field(default_factory=list)


def related_to(actor: Actor, call: ToolCall, tool: ToolSpec | None) -> Related:
    """The calls of ``call``'s tool sharing the args its ``related_by`` names."""
    shared = tool.related_args(call.args) if tool is not None else {}
    if not shared:
        return Related()
    calls = ToolCall.objects.filter(tool_name=call.tool_name, args__contains=shared)
    seen = in_visible_runs(actor, calls.exclude(pk=call.pk)).order_by("-requested_at", "-id")
    found = list(seen[:MAX_RELATED])
    amounts = [c.amount for c in [call, *found] if c.amount is not None]
    return Related(found, sum(amounts, Decimal(0)) if amounts else None)


def duplicates_of(actor: Actor, call: ToolCall) -> Duplicates:
    """The pending calls identical to ``call`` (``args_digest``), oldest first."""
    if call.status != CallStatus.PENDING_APPROVAL:
        return Duplicates()
    same = ToolCall.objects.filter(
        status=CallStatus.PENDING_APPROVAL, tool_name=call.tool_name, args_digest=call.args_digest
    )
    ids = list(
        in_visible_runs(actor, same).order_by("requested_at", "id").values_list("id", flat=True)
    )
    return Duplicates(ids[0], ids[1:]) if len(ids) > 1 else Duplicates()
