"""The inbox's list: one page of compact rows, a row for a live update, a row's full card.

A live update moves one row (``call_row``), never the page: the page's script asks for the row
of each call an event names and puts it in place, or takes it away.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.middleware.http import ConditionalGetMiddleware
from django.shortcuts import render
from django.utils.decorators import decorator_from_middleware

from agent_core.actors import Actor
from agent_core.models import ToolCall
from approvals.guards import may_see

from .. import listing, rows
from ..access import member_view
from ..cards import card_for
from .common import actor_of, count_header, fragment, is_fragment, nav_counts, page

# The page re-checks its list now and then in case an event was lost: unchanged, it is a 304.
conditional = decorator_from_middleware(ConditionalGetMiddleware)


def _context(request: HttpRequest, actor: Actor, nav: dict[str, int]) -> dict[str, Any]:
    found = listing.listing(actor, request.GET, waiting_on_you=nav["waiting_on_you"])
    query = request.GET.copy()
    query.pop("cursor", None)
    return {
        "listing": found,
        "sorts": listing.SORTS,
        "query": query.urlencode(),  # this list's filters and order, for its links
        "next_query": _with(request, cursor=found.page.next_cursor),
        "scope_query": {s: _with(request, show=s, cursor=None) for s in listing.SCOPES},
    }


def _with(request: HttpRequest, **changes: str | None) -> str:
    query = request.GET.copy()
    for key, value in changes.items():
        query.pop(key, None)
        if value:
            query[key] = value
    return query.urlencode()


@member_view
def inbox(request: HttpRequest) -> HttpResponse:
    """The inbox page: the first (or the asked-for) page of rows."""
    actor = actor_of(request)
    nav = nav_counts(actor)
    return page(request, "console/inbox.html", {**_context(request, actor, nav), "nav": nav})


@member_view
@conditional
def inbox_fragment(request: HttpRequest) -> HttpResponse:
    """The page's rows alone: after a reconnect, or the page's occasional re-check."""
    actor = actor_of(request)
    nav = nav_counts(actor)
    context = _context(request, actor, nav)
    return fragment(request, "console/partials/inbox_rows.html", context, nav=nav)


@member_view
def call_row(request: HttpRequest, call_id: str) -> HttpResponse:
    """One call's row for the page whose query string this request carries; 204 when the call
    is no longer pending there (decided, expired, or outside the page's scope and filters)."""
    actor = actor_of(request)
    row = listing.row_of(actor, call_id, request.GET)
    if row is None:
        response = HttpResponse(status=204)
    else:
        response = HttpResponse(rows.html(row))
    response["X-Console-Counts"] = count_header(actor)
    return response


@member_view
def call_card(request: HttpRequest, call_id: str) -> HttpResponse:
    """A row opened: the call's full card (a page of its own without JavaScript)."""
    actor = actor_of(request)
    call = ToolCall.objects.select_related("run", "thread", "message").filter(pk=call_id).first()
    # Only to those who may see it (SPEC §7): pending or not, an unseen call is unknown.
    if call is None or not may_see(actor, call):
        raise Http404("no such tool call")
    card = card_for(actor, call)
    if is_fragment(request):
        return render(request, "console/partials/card.html", {"card": card})
    return page(request, "console/call.html", {"card": card})
