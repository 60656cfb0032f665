"""An inbox row as its template reads it: a plain dict, every value computed once in Python.

A page shows fifty rows; the template engine resolving a dozen attribute chains, a ``{% url %}``
and two filters per row cost more than the page's query. Dict keys resolve first.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TypedDict

from django.urls import reverse
from django.utils.safestring import SafeString

from agent_core.choices import REQUESTER, CallStatus
from approvals.pending import PendingRow

from .templatetags.console import when

SUMMARY_CHARS = 160  # a row is one line; the card shows everything
_ID = "tc_0"  # stands for a call's id in the card URL reversed once per page


class Row(TypedDict):
    """One pending call as a line of the list (``partials/row.html``)."""

    id: str
    tool_name: str
    summary: str
    requester: str  # the requester's name
    decider: str  # "requester" or the approver role(s)
    approvals_needed: int
    approvals_given: int
    escalated_to: str
    expires_at: str  # ISO 8601, "" without a deadline
    due: SafeString | str  # the deadline's <time>, else the request's
    selectable: bool  # may be picked for a bulk decision (an approval the viewer may decide)
    key: str  # the sort key in microseconds since the epoch ("" for none: last), for the
    # page's script to place a row that arrives live
    url: str  # the row's full card


def build(
    calls: list[PendingRow], names: dict[str, str], *, selectable: bool, field: str
) -> list[Row]:
    """The rows of ``calls``; ``names`` maps requester refs to names, ``field`` is the sort
    key; only approvals are ``selectable`` (and only where the viewer decides them)."""
    card = reverse("console:call", args=[_ID])
    return [
        Row(
            id=c.id,
            tool_name=c.tool_name,
            summary=summary_of(c),
            requester=names.get(c.requester_ref, c.requester_ref or "nobody"),
            decider="requester" if c.kind == "human" or c.approver == REQUESTER else c.approver,
            approvals_needed=c.approvals_needed,
            approvals_given=len(c.approved_by or ()),
            escalated_to=c.escalated_to or "",
            expires_at=c.expires_at.isoformat() if c.expires_at else "",
            due=when(c.expires_at or c.requested_at),
            selectable=selectable and c.status == CallStatus.PENDING_APPROVAL,
            key=_key(getattr(c, field)),
            url=card.replace(_ID, c.id),
        )
        for c in calls
    ]


def summary_of(call: PendingRow) -> str:
    """The tool's one line, else the confirmation or question, else the arguments."""
    text = call.summary or call.confirmation
    if not text and call.kind == "human":
        text = str(call.args.get("question", ""))
    if not text:
        text = json.dumps(call.args, ensure_ascii=False, default=str, separators=(", ", ": "))
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"


def _key(value: datetime | None) -> str:
    return "" if value is None else str(int(value.timestamp() * 1_000_000))
