"""The two-person rule (N of M): distinct approvals counted towards a call's quorum.

The gate stamps a ``Quorum`` on a call whose requirement asks for more than one yes. Each
approval is recorded as it comes (an ``Approval`` row, an ``approval-progress`` frame); the call
stays ``pending_approval`` until the last one, which settles it like a single yes would. The
port counts votes under the run's row lock, so concurrent approvals by different people, on any
process, each count exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from django.db.models import OuterRef, QuerySet, Subquery, prefetch_related_objects
from django.db.models.functions import Coalesce
from django.utils import timezone

from agent_core.actors import Actor
from agent_core.engine import stream_log
from agent_core.engine.decisions import Decision
from agent_core.engine.frames import Frame
from agent_core.models import ToolCall

from .exceptions import InvalidDecision, NotApprover
from .models import Approval, Quorum
from .requirement import Requirement


class Vote(StrEnum):
    """What one approval did to a call's quorum."""

    COUNTED = "counted"  # recorded; more approvals are needed
    REPEATED = "repeated"  # this person had already approved
    COMPLETE = "complete"  # the last approval needed (or the call has no quorum)


# How many approvals a call needs (1 without a quorum) and those given since it last started
# waiting, as ``standing`` answers.
Standing = tuple[int, list[Approval]]


@dataclass(frozen=True)
class Tally:
    """The outcome of one vote, the audit note that says where the count stands, and the
    call's standing after the vote."""

    vote: Vote
    note: str
    standing: Standing


def stamp(call: ToolCall, requirement: Requirement) -> None:
    """Record the requirement's quorum for ``call`` (in the suspend transaction, before the call
    row itself: the foreign key is checked at commit)."""
    Quorum.objects.create(
        tool_call_id=call.pk,
        needed=requirement.quorum,
        requester_counts=requirement.requester_counts,
    )


def current(call: ToolCall) -> list[Approval]:
    """The approvals given since the call last started waiting, oldest first."""
    return list(Approval.objects.filter(tool_call_id=call.pk, at__gte=call.requested_at))


def vote(held: Decision, actor: Actor, via: str, *, remember: bool, args: Any) -> Tally:
    """Count ``actor``'s yes towards the call's quorum, under the run's lock the decision holds;
    the caller has checked that ``actor`` may decide the call and that it is still pending."""
    call = held.call
    # Read with the call (LOCK_CALL_WITH_QUORUM).
    needed, requester_counts = held.joined["quorum_needed"], held.joined["quorum_requester_counts"]
    if needed is None:
        return Tally(Vote.COMPLETE, "", (1, []))
    if remember:
        raise InvalidDecision("a call that needs several approvals cannot be remembered")
    if args is not None and args != call.args:
        raise InvalidDecision("a call that needs several approvals cannot be edited")
    if actor.ref == call.requester_ref and not requester_counts:
        raise NotApprover("the requester does not count towards this call's approvals")
    given = current(call)
    if any(a.by_ref == actor.ref for a in given):
        return Tally(Vote.REPEATED, _note(len(given), needed), (needed, given))
    # An approval of an earlier wait (before a re-approval) is replaced, not counted twice.
    approval, _ = Approval.objects.update_or_create(
        tool_call_id=call.pk, by_ref=actor.ref, defaults={"via": via, "at": timezone.now()}
    )
    given.append(approval)
    note = _note(len(given), needed)
    if len(given) >= needed:
        return Tally(Vote.COMPLETE, note, (needed, given))
    stream_log.emit(held.run.pk, [progress(call, given, needed)])
    return Tally(Vote.COUNTED, note, (needed, given))


def with_needed(calls: QuerySet[ToolCall]) -> QuerySet[ToolCall]:
    """``calls`` annotated with ``approvals_needed`` (1 without a quorum), in the same query."""
    needed = Quorum.objects.filter(tool_call=OuterRef("pk")).values("needed")
    return calls.annotate(approvals_needed=Coalesce(Subquery(needed), 1))


def attach(calls: list[ToolCall]) -> None:
    """Load the approvals of those ``calls`` (from ``with_needed``) that need several, for
    ``standing`` in a list: one query, none when no call of the list has a quorum."""
    prefetch_related_objects(
        [c for c in calls if getattr(c, "approvals_needed", 1) > 1], "approvals"
    )


def standing(call: ToolCall) -> Standing:
    """How many approvals ``call`` needs (1 without a quorum) and those given so far."""
    needed = getattr(call, "approvals_needed", None)
    if needed is None:
        found = Quorum.objects.filter(tool_call_id=call.pk).values_list("needed", flat=True)
        needed = next(iter(found), 1)
    if needed == 1:
        return 1, []
    return needed, [a for a in call.approvals.all() if a.at >= call.requested_at]


def progress(call: ToolCall, given: list[Approval], needed: int) -> Frame:
    """The ``approval-progress`` frame: who approved so far, and how many are needed."""
    return Frame(
        "approval-progress",
        {"tool_call_id": call.pk, "approvals": [a.as_dict() for a in given], "needed": needed},
    )


def _note(count: int, needed: int) -> str:
    return f"{count} of {needed} approvals"
