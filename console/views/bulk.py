"""Bulk decisions: approve or reject the selected calls of one tool, after a confirmation that
lists them. Each call is still its own audited attempt through the approval port, and each gets
its own result (one may have been decided by someone else meanwhile)."""

from __future__ import annotations

from dataclasses import dataclass

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST

from agent_core.actors import Actor
from agent_core.exceptions import AgentCoreError
from agent_core.models import ToolCall
from approvals import services as port
from approvals.guards import may_see

from .. import listing
from ..access import member_view
from ..cards import explain, refusal
from ..forms import BulkForm
from .common import actor_of, is_fragment, page

VIA = "console"


@dataclass(frozen=True)
class Result:
    """What became of one call of a bulk decision."""

    call: ToolCall
    applied: bool
    said: str


@require_POST
@member_view
def bulk(request: HttpRequest) -> HttpResponse:
    """First POST: the confirmation listing the calls; with ``confirm``: decide each one."""
    form = BulkForm(request.POST)
    calls = _calls(form, actor_of(request)) if form.is_valid() else []
    tools = {c.tool_name for c in calls}
    if form.is_valid() and len(tools) > 1:
        form.add_error("ids", "Select calls of one tool: " + ", ".join(sorted(tools)) + ".")
    if form.is_valid() and not calls:
        form.add_error("ids", "None of these calls exists any more.")
    if not form.is_valid():
        return _render(request, "console/partials/bulk_confirm.html", {"form": form}, status=400)
    rows = listing.rows_by_id([c.pk for c in calls])
    context = {"form": form, "rows": rows, "action": form.cleaned_data["action"]}
    if not form.cleaned_data["confirm"]:
        return _render(request, "console/partials/bulk_confirm.html", context)
    actor = actor_of(request)
    results = [_decide(actor, call, form) for call in calls]
    context["results"] = results
    context["applied"] = sum(r.applied for r in results)
    return _render(request, "console/partials/bulk_results.html", context)


def _calls(form: BulkForm, actor: Actor) -> list[ToolCall]:
    # Only calls the actor may see (SPEC §7): another's id is as unknown here as anywhere.
    ids = form.cleaned_data["ids"]
    found = ToolCall.objects.select_related("run", "thread").in_bulk(ids)
    return [found[i] for i in ids if i in found and may_see(actor, found[i])]


def _decide(actor: Actor, call: ToolCall, form: BulkForm) -> Result:
    """One call, one attempt through the port (audited there, refusals too)."""
    rejecting = form.cleaned_data["action"] == "reject"
    try:
        if rejecting:
            outcome = port.reject(call.pk, actor=actor, reason=form.cleaned_data["reason"], via=VIA)
        else:
            outcome = port.approve(call.pk, actor=actor, via=VIA)
    except AgentCoreError as exc:
        call.refresh_from_db()
        return Result(call, False, f"{refusal(exc, call)} Not sent.")
    call.refresh_from_db()
    if outcome == port.Outcome.UNCHANGED:
        return Result(call, False, f"{explain(call)} Nothing more was sent.")
    return Result(call, True, "Rejected." if rejecting else "Approved.")


def _render(
    request: HttpRequest, partial: str, context: dict[str, object], *, status: int = 200
) -> HttpResponse:
    if is_fragment(request):
        return render(request, partial, context, status=status)
    return page(request, "console/bulk.html", {**context, "partial": partial}, status=status)
