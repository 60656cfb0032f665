"""What every console page shares: the actor, the navigation counts, fragment requests."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from agent_core.actors import Actor, actor_for_user
from agent_core.choices import CallStatus
from agent_core.engine.access import in_visible_runs
from agent_core.exceptions import AgentCoreError, NotFound, RetryAfter
from agent_core.models import ToolCall
from approvals.attempts import Entry, audit
from approvals.guards import may_see
from approvals.models import Action
from approvals.selectors import pending_count

from ..access import has_console_access, may_browse_admin

FRAGMENT_HEADER = "X-Console-Fragment"
VIA = "console"  # the surface every console decision names


def actor_of(request: HttpRequest) -> Actor:
    """The actor of the logged-in user (roles are the user's group names)."""
    return actor_for_user(request.user)


def is_fragment(request: HttpRequest) -> bool:
    """The page's script asked for a fragment to swap in, not a whole page."""
    return request.headers.get(FRAGMENT_HEADER) == "1"


def nav_counts(actor: Actor) -> dict[str, int]:
    """The numbers in the navigation: what waits on this actor, what waits in doubt."""
    in_doubt = ToolCall.objects.filter(status=CallStatus.IN_DOUBT)
    # Calls in doubt are rare (a crash mid-effect): ask whether there are any before building
    # the query of those the actor may see.
    seen = in_visible_runs(actor, in_doubt).count() if in_doubt.exists() else 0
    return {"waiting_on_you": pending_count(actor), "in_doubt": seen}


def page(
    request: HttpRequest, template: str, context: dict[str, Any], *, status: int = 200
) -> HttpResponse:
    """Render a full console page, with the navigation's counts (``nav``, unless given)."""
    context = {
        **context,
        "nav": context.get("nav") or nav_counts(actor_of(request)),
        "admin_link": may_browse_admin(request.user),
        "operator": has_console_access(request.user),  # the operators' pages in the navigation
    }
    return render(request, template, context, status=status)


def fragment(
    request: HttpRequest,
    template: str,
    context: dict[str, Any],
    *,
    nav: dict[str, int] | None = None,
) -> HttpResponse:
    """Render a fragment for the page's script, with the navigation's counts in a header
    (``nav`` when the view has them already)."""
    response = render(request, template, context)
    response["X-Console-Counts"] = count_header(actor_of(request), nav)
    return response


def count_header(actor: Actor, nav: dict[str, int] | None = None) -> str:
    """The navigation's counts as the ``X-Console-Counts`` header the page's script reads."""
    return ";".join(f"{k}={v}" for k, v in (nav or nav_counts(actor)).items())


def retry_after(response: HttpResponse, refusal: AgentCoreError) -> HttpResponse:
    """``response`` with the ``Retry-After`` a refusal that asks to wait carries (429)."""
    if isinstance(refusal, RetryAfter):
        response["Retry-After"] = str(refusal.retry_after)
    return response


def tool_call_or_404(request: HttpRequest, call_id: str) -> ToolCall:
    """The call a form posted to, with its run and thread; 404 for an unknown id and for one
    the user may not see (the approval port's rule, ``approvals.guards.may_see``)."""
    call = ToolCall.objects.select_related("run", "thread").filter(pk=call_id).first()
    if call is None or not may_see(actor_of(request), call):
        raise Http404("no such tool call")
    return call


def call_to_decide(request: HttpRequest, call_id: str, action: Action) -> ToolCall:
    """``tool_call_or_404`` for a decision: asking to decide an unseen id is also a refused
    attempt, audited as the approval port audits one."""
    try:
        return tool_call_or_404(request, call_id)
    except Http404:
        refuse_unseen(
            call_id, ToolCall.objects.filter(pk=call_id).first(), action, actor_of(request)
        )
        raise


def refuse_unseen(call_id: str, call: ToolCall | None, action: Action, actor: Actor) -> None:
    """Audit a decision asked of the console for a call ``actor`` may not see (``call``: the
    call if one has that id), as the port's refusal ``not_found``."""
    refusal = NotFound(f"no tool call {call_id}")
    audit(Entry.refused(call_id, call, action, actor, VIA, refusal))
