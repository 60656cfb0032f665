"""The inbox as a list that scales: one page of compact rows, filtered, searched and paginated
by the REST API's own ``PendingFilter`` and ``PendingPagination``.

*Waiting on you* is the policy's ``decidable(actor)`` (the pending API's query, a ``UNION`` of one
ordered, limited branch per case); *Waiting on others* is every other pending call the viewer may
see (``agent_core.engine.access``: an unseen call is never shown, SPEC §7), read-only. Unfiltered,
each
tab's first page is a named statement (``approvals.selectors.first_page``, ``seen_first_page``);
the ORM compiles the query of any other page.
A row opens into the full card (``console.cards``), fetched when it is opened.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from django.contrib.auth import get_user_model
from django.db.models import Q, QuerySet
from django.utils.safestring import SafeString

from agent_core.actors import Actor
from agent_core.agents import get_agent
from agent_core.api.pagination import Page
from agent_core.compositions import Parallel
from agent_core.engine.access import in_visible_runs
from agent_core.exceptions import AgentNotFound
from agent_core.models import ToolCall
from agent_core.toolcalls import delegation
from approvals import pending, selectors
from approvals.api.filters import PendingFilter, PendingPagination
from approvals.pending import PendingRow

from . import rows
from .filters import ByPerson, bad_request, sort_of
from .rows import Row

Scope = Literal["yours", "others"]
SCOPES: tuple[Scope, ...] = ("yours", "others")
SORTS = {
    "oldest": "Oldest first",
    "newest": "Newest first",
    "deadline": "Deadline soonest",
    "amount": "Largest amount first",
}


class InboxFilter(PendingFilter):
    """The API's filters, with the requester given as a username (or an actor ref)."""

    requester = ByPerson("requester_ref", "Requester")


@dataclass
class Listing:
    """One page of the inbox as one viewer sees it."""

    scope: Scope
    sort: str
    filters: InboxFilter
    page: Page[PendingRow]
    rows: list[Row]
    counts: dict[str, int]
    descending: bool

    @property
    def html(self) -> SafeString:
        """The page's rows as the list shows them."""
        return rows.html_of(self.rows)

    @property
    def filtered(self) -> bool:
        """Whether any filter or the search narrows the list."""
        return self.filters.narrows()


def scope_of(params: Any) -> Scope:
    return "others" if params.get("show") == "others" else "yours"


def filters_of(scope: Scope, params: Any) -> InboxFilter:
    """The filters in ``params`` on the scope's calls (each branch of *Waiting on you* names the
    waiting status itself: ``pending.waiting``)."""
    calls = selectors.all_calls() if scope == "yours" else selectors.pending_calls()
    return InboxFilter(params, queryset=calls)


def calls_in(
    actor: Actor, scope: Scope, filters: InboxFilter
) -> tuple[QuerySet[ToolCall], Q | None]:
    """The scope's calls narrowed by ``filters`` (none of them if they are not valid), and the
    ``UNION`` branches, as the ORM compiles them."""
    calls = filters.qs if filters.is_valid() else filters.queryset.none()
    if scope == "yours":
        return calls, selectors.pending_branches(actor)
    return in_visible_runs(actor, calls.exclude(selectors.decidable_by(actor))), None


def first_page(
    actor: Actor, scope: Scope, params: Any, pagination: PendingPagination
) -> Page[PendingRow] | None:
    """The scope's first unfiltered page as a named statement (``None``: compile it)."""
    named = selectors.first_page if scope == "yours" else selectors.seen_first_page
    return named(actor, params, pagination)


def listing(actor: Actor, params: Any, *, waiting_on_you: int) -> Listing:
    """The page of the inbox ``params`` asks for (``show``, the filters, ``sort``, ``cursor``)."""
    scope = scope_of(params)
    filters = filters_of(scope, params)
    pagination = PendingPagination()
    with bad_request():
        # Unfiltered, the default policy's first page is a named statement: nothing compiled.
        found = None if filters.narrows() else first_page(actor, scope, params, pagination)
        if found is None:
            calls, branches = calls_in(actor, scope, filters)
            found = pending.page(calls, params, pagination, branches=branches)
    result = Listing(
        scope=scope,
        sort=found.sort,
        filters=filters,
        page=found,
        rows=rows_of(found.rows, scope, field=pagination.orderings[found.sort].field),
        counts={"yours": waiting_on_you},
        descending=pagination.orderings[found.sort].descending,
    )
    whole = not result.filtered and not params.get("cursor") and found.next_cursor is None
    if scope == "others" and whole:  # the whole tab is on this page: no need to count it
        result.counts["others"] = len(found.rows)
    else:
        result.counts["others"] = others_count(actor, waiting_on_you)
    return result


def others_count(actor: Actor, waiting_on_you: int) -> int:
    """How many calls are *Waiting on others* for ``actor``: the waiting calls it may see, less
    those waiting on it (whoever may decide a call may see its run:
    ``agent_core.engine.access``)."""
    return selectors.seen_waiting_count(actor) - waiting_on_you


def row_of(actor: Actor, call_id: str, params: Any) -> Row | None:
    """The row of one call as the page ``params`` describes would show it; ``None`` when the
    call is no longer pending or does not belong to that page's scope and filters."""
    scope = scope_of(params)
    calls, branches = calls_in(actor, scope, filters_of(scope, params))
    if branches is not None:
        calls = calls.filter(branches)
    ordering = PendingPagination.orderings[sort_of(PendingPagination(), params)]
    found = pending.rows(list(calls.filter(pk=call_id).values_list("id", flat=True)))
    return rows_of(found, scope, field=ordering.field)[0] if found else None


def rows_by_id(calls: list[ToolCall]) -> list[Row]:
    """The rows of ``calls``, pending or not, in that order (the confirmation of a bulk
    decision). Calls, not ids: the caller has found each one and checked that the viewer may
    see it (``approvals.guards.may_see``); an id alone would show any call to anyone."""
    oldest = PendingPagination.orderings["oldest"]
    ids = [c.pk for c in calls]
    found = {row.id: row for row in pending.rows(ids)}
    return rows_of([found[i] for i in ids if i in found], "yours", field=oldest.field)


def rows_of(calls: list[PendingRow], scope: Scope, *, field: str) -> list[Row]:
    names = names_of({c.requester_ref for c in calls})
    chains = {c.run_id: chain_of(c.run_id) for c in calls if c.parent_run_id is not None}
    return rows.build(calls, names, chains, selectable=scope == "yours", field=field)


def chain_of(run_id: str) -> str:
    """A delegated run's chain of agents ("support → campaign_review → legal"), and for a
    parallel branch which branch it is: one query per delegated row (most rows have none)."""
    agents = delegation.chain(run_id)
    text = " → ".join(agents)
    if len(agents) > 1 and _is_branch(agents[-2], agents[-1]):
        text += f" (branch {agents[-1]} of {agents[-2]})"
    return text


def _is_branch(parent: str, agent: str) -> bool:
    try:
        composed = get_agent(parent)
    except AgentNotFound:
        return False
    return isinstance(composed, Parallel) and agent in composed.branches


def names_of(refs: set[str]) -> dict[str, str]:
    """Usernames of the ``user:<pk>`` refs among ``refs``, in one query."""
    pks = {int(r[5:]) for r in refs if r.startswith("user:") and r[5:].isdigit()}
    if not pks:
        return {}
    user = get_user_model()
    users = user.objects.filter(pk__in=pks).values_list("pk", user.USERNAME_FIELD)
    return {f"user:{pk}": str(name) for pk, name in users}
