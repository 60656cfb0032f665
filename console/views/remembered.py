"""Remembered approvals the viewer may see (on their threads, or granted by them), and Revoke.

Revoking goes through the approval port (``approvals.amendments.revoke``, ``via="console"``),
which lets only the thread's owner, the granter or an operator revoke and audits every attempt.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from agent_core.exceptions import AgentCoreError
from approvals import amendments
from approvals.models import RememberedApproval
from approvals.selectors import remembered_for

from ..access import console_view
from .common import actor_of, page

VIA = "console"


def _page(
    request: HttpRequest, *, show_all: bool, error: str = "", failed: int = 0, status: int = 200
) -> HttpResponse:
    grants = remembered_for(actor_of(request), include_inactive=show_all).select_related(
        "source_tool_call"
    )
    return page(
        request,
        "console/remembered.html",
        {"grants": list(grants), "show_all": show_all, "error": error, "failed": failed},
        status=status,
    )


@console_view
def remembered(request: HttpRequest) -> HttpResponse:
    """Active remembered approvals (``?all=1``: revoked and expired ones too), newest first."""
    return _page(request, show_all=request.GET.get("all") == "1")


@require_POST
@console_view
def revoke(request: HttpRequest, grant_id: int) -> HttpResponse:
    """Revoke a remembered approval: later calls of its tool in its thread ask again."""
    show_all = request.POST.get("all") == "1"
    try:
        outcome = amendments.revoke(grant_id, actor=actor_of(request), via=VIA)
    except AgentCoreError as exc:
        return _page(
            request, show_all=show_all, error=exc.message, failed=grant_id, status=exc.status_code
        )
    grant = RememberedApproval.objects.get(pk=grant_id)
    if outcome == amendments.Result.UNCHANGED:
        messages.info(request, f"{grant.tool_name} in this thread was already revoked.")
    else:
        messages.success(
            request, f"Revoked: {grant.tool_name} asks again in thread {grant.thread_id}."
        )
    back = reverse("console:remembered")
    return redirect(f"{back}?all=1" if show_all else back)
