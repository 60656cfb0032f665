"""Bulk decisions: approve or reject the selected calls of one tool, after a confirmation that
lists them. Each call is still its own audited attempt through the approval port, and each gets
its own result (one may have been decided by someone else meanwhile)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST

from agent_core.actors import Actor
from agent_core.exceptions import AgentCoreError
from agent_core.models import ToolCall
from approvals import services as port

from .. import listing
from ..access import console_view
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
@console_view
def bulk(request: HttpRequest) -> HttpResponse:
    """First POST: the confirmation listing the calls; with ``confirm``: decide each one."""
    form = BulkForm(request.POST)
    # Cleaned first so the calls are listed even when the reason is missing: the dialog asks
    # for it over them.
    form.full_clean()
    calls = _calls(form.cleaned_data.get("ids", []))
    tools = {c.tool_name for c in calls}
    if len(tools) > 1:
        form.add_error("ids", "Select calls of one tool: " + ", ".join(sorted(tools)) + ".")
        calls = []
    elif "ids" in form.cleaned_data and not calls:
        form.add_error("ids", "None of these calls exists any more.")
    amounts = [c.amount for c in calls if c.amount is not None]
    context = {
        "form": form,
        "rows": listing.rows_by_id([c.pk for c in calls]) if calls else [],
        "action": form.cleaned_data.get("action", ""),
        "total": sum(amounts, Decimal(0)) if amounts else None,
    }
    if not form.is_valid():
        return _render(request, "console/partials/bulk_confirm.html", context, status=400)
    if not form.cleaned_data["confirm"]:
        return _render(request, "console/partials/bulk_confirm.html", context)
    actor = actor_of(request)
    results = [_decide(actor, call, form) for call in calls]
    context["results"] = results
    context["applied"] = sum(r.applied for r in results)
    return _render(request, "console/partials/bulk_results.html", context)


def _calls(ids: list[str]) -> list[ToolCall]:
    found = ToolCall.objects.select_related("run", "thread").in_bulk(ids)
    return [found[i] for i in ids if i in found]


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
