"""An inbox row: a plain dict, every value computed once in Python, and its HTML.

A page shows fifty rows; the template engine resolving a dozen attribute chains, a ``{% url %}``
and two filters per row cost more than the page's query, and including a row's template fifty
times still cost 3-5 ms a page at 1M calls (bench/README.md): a row is one ``str.format`` of
values escaped once (``html``).
"""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from html import escape
from typing import TypedDict

from django.urls import reverse
from django.utils.safestring import SafeData, SafeString, mark_safe

from agent_core.choices import REQUESTER, CallStatus
from approvals.pending import PendingRow

from .bidi import visible
from .templatetags.console import when

SUMMARY_CHARS = 160  # a row is one line; the card shows everything
_ID = "tc_0"  # stands for a call's id in the card URL reversed once per page


class Row(TypedDict):
    """One pending call as a line of the list (``html``)."""

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
    amount: str  # the tool's number for the call (``@tool(amount=)``), "" without one
    duplicates: str  # the id of the oldest other pending call this one duplicates, else ""
    chain: str  # a delegated call's agents ("support → campaign_review → legal"), else ""


def build(
    calls: list[PendingRow],
    names: dict[str, str],
    chains: dict[str, str],
    *,
    selectable: bool,
    field: str,
) -> list[Row]:
    """The rows of ``calls``; ``names`` maps requester refs to names, ``chains`` the delegated
    runs' ids to their chains, ``field`` is the sort key; only approvals are ``selectable``
    (and only where the viewer decides them)."""
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
            amount="" if c.amount is None else f"{c.amount:,.2f}",
            duplicates=c.duplicates or "",
            chain=chains.get(c.run_id, ""),
        )
        for c in calls
    ]


def summary_of(call: PendingRow) -> str:
    """The tool's one line, else the confirmation or question, else the arguments (with its bidi
    controls shown: ``bidi``)."""
    text = call.summary or call.confirmation
    if not text and call.kind == "human":
        text = str(call.args.get("question", ""))
    if not text:
        text = json.dumps(call.args, ensure_ascii=False, default=str, separators=(", ", ": "))
    text = visible(text)
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"


def _key(value: datetime | Decimal | None) -> str:
    if value is None:
        return ""
    if isinstance(value, Decimal):
        return str(value)
    return str(int(value.timestamp() * 1_000_000))


_ROW = """<li class="row{read_only}" data-row="{id}" data-key="{key}" data-tool="{tool_name}">
  <div class="row-main">
    {select}
    <a class="row-open" href="{url}" data-open aria-expanded="false" aria-controls="slot-{id}">\
<code>{tool_name}</code> <span class="summary">{summary}</span></a>{amount}{duplicate}{chain}
    <span class="row-who"><span class="sr-only">requested by </span>{requester} \
<span aria-hidden="true">→</span><span class="sr-only">, decided by</span> {decider}{quorum}\
{escalated}</span>
    <span class="row-due">{due}</span>
  </div>
  <div class="row-card" id="slot-{id}" data-slot></div>
</li>
"""
_SELECT = (
    '<input type="checkbox" name="ids" value="{id}" form="bulk" data-select'
    ' aria-label="Select {tool_name} {id}">'
)
_NO_SELECT = '<span class="no-select"></span>'


def html(row: Row) -> SafeString:
    """The row as the list shows it (``inbox.js`` reads its ``data-`` attributes).

    Every value is escaped here, once (``_e``), and the parts are put together with
    ``str.format``: what ``format_html`` did, without its per-argument checks for lazy strings
    and the five nested calls a row took (a page has fifty rows).
    """
    text = {k: _e(row[k]) for k in ("id", "key", "tool_name", "summary", "url", "requester")}
    given, needed = row["approvals_given"], row["approvals_needed"]
    due = _e(row["due"])
    return mark_safe(
        _ROW.format(
            **text,
            decider=_e(row["decider"]),
            read_only="" if row["selectable"] else " ro",
            select=_SELECT.format(**text) if row["selectable"] else _NO_SELECT,
            quorum=f" · {given} of {needed}" if needed > 1 else "",
            amount=f' <span class="row-amount" data-amount="{_e(row["amount"])}">'
            f'<span class="sr-only">amount </span>{_e(row["amount"])}</span>'
            if row["amount"]
            else "",
            duplicate=f' <span class="badge duplicate" data-duplicate-of="{_e(row["duplicates"])}">'
            f"duplicate of {_e(row['duplicates'])}</span>"
            if row["duplicates"]
            else "",
            escalated=f" · <span data-escalated>escalated to {_e(row['escalated_to'])}</span>"
            if row["escalated_to"]
            else "",
            chain=f' <span class="row-chain" data-chain>{_e(row["chain"])}</span>'
            if row["chain"]
            else "",
            due=f'<span class="badge expiry" data-countdown="{_e(row["expires_at"])}">expires '
            f"{due}</span>"
            if row["expires_at"]
            else f'<span class="muted">asked {due}</span>',
        )
    )


def _e(value: str) -> str:
    """``conditional_escape`` of a str: safe HTML as it is, any other text escaped."""
    return str(value) if isinstance(value, SafeData) else escape(value)


def html_of(rows: list[Row]) -> SafeString:
    """The rows of a list, one a line."""
    return mark_safe("".join(f"{html(row)}\n" for row in rows))
