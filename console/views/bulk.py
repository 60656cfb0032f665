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
from agent_core.api.throttles import DecisionThrottle
from agent_core.exceptions import AgentCoreError
from agent_core.models import ToolCall
from approvals import services as port
from approvals.guards import may_see
from approvals.models import Action

from .. import listing
from ..access import member_view
from ..cards import explain, refusal
from ..forms import BulkForm
from .common import VIA, actor_of, is_fragment, page, refuse_unseen


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
    actor = actor_of(request)
    # Cleaned first so the calls are listed even when the reason is missing: the dialog asks
    # for it over them.
    form.full_clean()
    named = {"ids", "action"} <= form.cleaned_data.keys()
    calls = _calls(actor, form) if named else []
    tools = {c.tool_name for c in calls}
    if len(tools) > 1:
        form.add_error("ids", "Select calls of one tool: " + ", ".join(sorted(tools)) + ".")
        calls = []
    elif "ids" in form.cleaned_data and not calls:
        form.add_error("ids", "None of these calls exists any more.")
    amounts = [c.amount for c in calls if c.amount is not None]
    context = {
        "form": form,
        "rows": listing.rows_by_id(calls) if calls else [],
        "action": form.cleaned_data.get("action", ""),
        "total": sum(amounts, Decimal(0)) if amounts else None,
    }
    if not form.is_valid():
        return _render(request, "console/partials/bulk_confirm.html", context, status=400)
    if not form.cleaned_data["confirm"]:
        return _render(request, "console/partials/bulk_confirm.html", context)
    results = [_decide(actor, call, form) for call in calls]
    context["results"] = results
    context["applied"] = sum(r.applied for r in results)
    return _render(request, "console/partials/bulk_results.html", context)


def _calls(actor: Actor, form: BulkForm) -> list[ToolCall]:
    """The calls the form names that ``actor`` may see, in its order. An unseen id is one that
    does not exist (SPEC §7), and asking to decide it is a refused attempt, audited as the port
    audits one (both steps: the confirmation is asked with the decision in it)."""
    ids = form.cleaned_data["ids"]
    action = Action(form.cleaned_data["action"])
    found = ToolCall.objects.select_related("run", "thread").in_bulk(ids)
    seen = []
    for call_id in ids:
        call = found.get(call_id)
        if call is not None and may_see(actor, call):
            seen.append(call)
        else:
            refuse_unseen(call_id, call, action, actor)
    return seen


def _decide(actor: Actor, call: ToolCall, form: BulkForm) -> Result:
    """One call, one attempt through the port (audited there, refusals too)."""
    rejecting = form.cleaned_data["action"] == "reject"
    try:
        DecisionThrottle(actor).check()  # each call counts, as each would through the API
        if rejecting:
            outcome = port.reject(call.pk, actor=actor, reason=form.cleaned_data["reason"], via=VIA)
        else:
            outcome = port.approve(call.pk, actor=actor, via=VIA)
    except AgentCoreError as exc:
        call.refresh_from_db()
        return Result(call, False, f"{refusal(exc, call)} Not sent.")
    call.refresh_from_db()
    if outcome.result == port.Result.UNCHANGED:
        return Result(call, False, f"{explain(call)} Nothing more was sent.")
    return Result(call, True, "Rejected." if rejecting else "Approved.")


def _render(
    request: HttpRequest, partial: str, context: dict[str, object], *, status: int = 200
) -> HttpResponse:
    if is_fragment(request):
        return render(request, partial, context, status=status)
    return page(request, "console/bulk.html", {**context, "partial": partial}, status=status)
