"""The inbox as a list that scales: one page of compact rows, filtered, searched and paginated
by the REST API's own ``PendingFilter`` and ``PendingPagination``.

*Waiting on you* is the policy's ``decidable(actor)`` (the pending API's query, a ``UNION`` of one
ordered, limited branch per case); *Waiting on others* is every other pending call the viewer may
see (``agent_core.access``: an unseen call is never shown, SPEC §7), read-only.
A row opens into the full card (``console.cards``), fetched when it is opened.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from django.contrib.auth import get_user_model
from django.db.models import Q, QuerySet

from agent_core.access import is_operator, visible_runs
from agent_core.actors import Actor
from agent_core.api.pagination import Page
from agent_core.models import REQUESTER, CallStatus, ToolCall
from approvals import escalation, quorum, selectors
from approvals.api.filters import PendingFilter, PendingPagination

from .filters import ByPerson, paginate, sort_of

Scope = Literal["yours", "others"]
SCOPES: tuple[Scope, ...] = ("yours", "others")
SUMMARY_CHARS = 160  # a row is one line; the card shows everything
SORTS = {"oldest": "Oldest first", "newest": "Newest first", "deadline": "Deadline soonest"}


class InboxFilter(PendingFilter):
    """The API's filters, with the requester given as a username (or an actor ref)."""

    requester = ByPerson("requester_ref", "Requester")


@dataclass
class Row:
    """One pending call as a line of the list."""

    call: ToolCall
    requester: str  # the requester's name
    selectable: bool  # may be picked for a bulk decision (an approval the viewer may decide)
    sort_key: datetime | None

    @property
    def summary(self) -> str:
        """The tool's one line, else the confirmation or question, else the arguments."""
        call = self.call
        text = call.summary or call.confirmation
        if not text and call.kind == "human":
            text = str(call.args.get("question", ""))
        if not text:
            text = json.dumps(call.args, ensure_ascii=False, default=str, separators=(", ", ": "))
        return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"

    @property
    def decider(self) -> str:
        if self.call.kind == "human" or self.call.approver == REQUESTER:
            return "requester"
        return self.call.approver

    @property
    def approvals_needed(self) -> int:
        return int(getattr(self.call, "approvals_needed", 1))

    @property
    def approvals_given(self) -> int:
        return len(quorum.standing(self.call)[1])

    @property
    def key(self) -> str:
        """The sort key in microseconds since the epoch ("" for none: last), for the page's
        script to place a row that arrives live."""
        return "" if self.sort_key is None else str(int(self.sort_key.timestamp() * 1_000_000))


@dataclass
class Listing:
    """One page of the inbox as one viewer sees it."""

    scope: Scope
    sort: str
    filters: InboxFilter
    page: Page[ToolCall]
    rows: list[Row]
    counts: dict[str, int]
    descending: bool

    @property
    def filtered(self) -> bool:
        """Whether any filter or the search narrows the list."""
        return not self.filters.is_valid() or any(self.filters.form.cleaned_data.values())


def scope_of(params: Any) -> Scope:
    return "others" if params.get("show") == "others" else "yours"


def calls_in(
    actor: Actor, scope: Scope, params: Any
) -> tuple[QuerySet[ToolCall], Q | None, InboxFilter]:
    """The scope's calls narrowed by the filters in ``params``, and the ``UNION`` branches."""
    who = selectors.decidable_by(actor)
    pending = escalation.with_escalation(quorum.with_needed(selectors.pending_calls()))
    filters = InboxFilter(params, queryset=pending)
    calls = filters.qs if filters.is_valid() else pending.none()
    if scope == "yours":
        return calls, who, filters
    return others_of(actor, calls.exclude(who)), None, filters


def others_of(actor: Actor, calls: QuerySet[ToolCall]) -> QuerySet[ToolCall]:
    """``calls`` narrowed to the runs ``actor`` may see (all of them for an operator)."""
    if is_operator(actor):
        return calls
    return calls.filter(run__in=visible_runs(actor).values("pk"))


def listing(actor: Actor, params: Any, *, waiting_on_you: int) -> Listing:
    """The page of the inbox ``params`` asks for (``show``, the filters, ``sort``, ``cursor``)."""
    scope = scope_of(params)
    calls, branches, filters = calls_in(actor, scope, params)
    pagination = PendingPagination()
    page = paginate(pagination, calls, params, branches=branches)
    pending = selectors.pending_calls()
    if is_operator(actor):  # every pending call is in one tab or the other
        others = pending.count() - waiting_on_you
    else:
        others = others_of(actor, pending.exclude(selectors.decidable_by(actor))).count()
    return Listing(
        scope=scope,
        sort=page.sort,
        filters=filters,
        page=page,
        rows=rows_of(page.rows, scope, field=pagination.orderings[page.sort].field),
        counts={"yours": waiting_on_you, "others": others},
        descending=pagination.orderings[page.sort].descending,
    )


def row_of(actor: Actor, call_id: str, params: Any) -> Row | None:
    """The row of one call as the page ``params`` describes would show it; ``None`` when the
    call is no longer pending or does not belong to that page's scope and filters."""
    scope = scope_of(params)
    calls, branches, _ = calls_in(actor, scope, params)
    if branches is not None:
        calls = calls.filter(branches)
    call = calls.filter(pk=call_id).first()
    if call is None:
        return None
    sort = sort_of(PendingPagination(), params)
    return rows_of([call], scope, field=PendingPagination.orderings[sort].field)[0]


def rows_of(calls: list[ToolCall], scope: Scope, *, field: str) -> list[Row]:
    quorum.attach(calls)
    names = names_of({c.requester_ref for c in calls})
    return [
        Row(
            call=c,
            requester=names.get(c.requester_ref, c.requester_ref or "nobody"),
            selectable=scope == "yours" and c.status == CallStatus.PENDING_APPROVAL,
            sort_key=getattr(c, field),
        )
        for c in calls
    ]


def names_of(refs: set[str]) -> dict[str, str]:
    """Usernames of the ``user:<pk>`` refs among ``refs``, in one query."""
    pks = {int(r[5:]) for r in refs if r.startswith("user:") and r[5:].isdigit()}
    users = get_user_model().objects.filter(pk__in=pks)
    return {f"user:{u.pk}": u.get_username() for u in users}
