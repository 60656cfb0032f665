"""My requests: the calls a person's own runs wait on, with who must decide, by when, and how far
the decision has come. Every logged-in user has it (``member_view``): it shows only their own.
The page follows them live: on an event of one of the user's runs it fetches its list again."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse

from agent_core.choices import REQUESTER, CallStatus
from agent_core.models import ToolCall

from ..access import member_view
from .common import actor_of, fragment, page

WAITING = (CallStatus.PENDING_APPROVAL, CallStatus.PENDING_INPUT)
SHOWN = 200  # a person's own pending calls are few; more than this is a runaway agent


def _context(request: HttpRequest) -> dict[str, Any]:
    """The user's own pending calls, oldest first (the first to expire is usually the oldest)."""
    actor = actor_of(request)
    calls = list(
        ToolCall.objects.filter(requester_ref=actor.ref, status__in=WAITING)
        .select_related("run")
        .order_by("requested_at", "position")[:SHOWN]
    )
    return {"calls": calls, "requester": REQUESTER}


@member_view
def mine(request: HttpRequest) -> HttpResponse:
    """The page."""
    return page(request, "console/mine.html", _context(request))


@member_view
def mine_fragment(request: HttpRequest) -> HttpResponse:
    """The list alone, for the page's live refresh (with the navigation's counts)."""
    return fragment(request, "console/partials/mine_list.html", _context(request))
