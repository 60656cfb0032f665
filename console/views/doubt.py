"""Calls a crash left in doubt, and marking them done (with a result) or not done.

Both go through the approval port with ``via="console"``; the port authorises, resolves and
audits. A refusal is shown on the card it concerns, with the HTTP status it means.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from agent_core.actors import Actor
from agent_core.api.throttles import DecisionThrottle
from agent_core.exceptions import AgentCoreError, AlreadyDecided, RunNotActive
from agent_core.models import ToolCall
from approvals import services as port
from approvals.exceptions import NotApprover
from approvals.models import Action

from ..access import console_view
from ..forms import MarkDoneForm
from ..in_doubt import explain_resolved, in_doubt_calls
from .common import VIA, actor_of, call_to_decide, fragment, page, retry_after


def _item(actor: Actor, call: ToolCall, form: MarkDoneForm | None = None) -> dict[str, Any]:
    return {
        "call": call,
        "form": form or MarkDoneForm(prefix=call.pk),
        "may_decide": port.may_resolve(actor, call),
        "error": "",
    }


def _page(
    request: HttpRequest,
    *,
    call: ToolCall | None = None,
    form: MarkDoneForm | None = None,
    error: str = "",
    status: int = 200,
) -> HttpResponse:
    """The list; ``call`` (with its bound ``form`` or refusal ``error``) first when it left it."""
    actor = actor_of(request)
    items = [
        _item(actor, c, form if call is not None and c.pk == call.pk else None)
        for c in in_doubt_calls(actor)
    ]
    if call is not None:
        mine = next((i for i in items if i["call"].pk == call.pk), None)
        if mine is None:
            mine = _item(actor, call, form)
            items.insert(0, mine)
        mine["error"] = error
    return page(request, "console/in_doubt.html", {"calls": items}, status=status)


@console_view
def in_doubt_list(request: HttpRequest) -> HttpResponse:
    """Every call waiting on a person to say whether its side effect happened."""
    return _page(request)


@console_view
def in_doubt_fragment(request: HttpRequest) -> HttpResponse:
    """The list alone, fetched by the page when something changed."""
    actor = actor_of(request)
    items = [_item(actor, c) for c in in_doubt_calls(actor)]
    return fragment(request, "console/partials/in_doubt_list.html", {"calls": items})


@require_POST
@console_view
def mark_done(request: HttpRequest, call_id: str) -> HttpResponse:
    """It happened: record the result the person gives; the tool does not run again."""
    call = call_to_decide(request, call_id, Action.MARK_DONE)
    form = MarkDoneForm(request.POST, prefix=call_id)
    if not form.is_valid():
        return _page(request, call=call, form=form, status=400)
    return _resolve(
        request,
        call,
        lambda: port.mark_done(
            call_id, actor=actor_of(request), result=form.cleaned_data["result"], via=VIA
        ),
        done="Marked done",
        form=form,
    )


@require_POST
@console_view
def mark_not_done(request: HttpRequest, call_id: str) -> HttpResponse:
    """It did not happen: the call runs again (after a fresh approval, if its tool says so)."""
    call = call_to_decide(request, call_id, Action.MARK_NOT_DONE)
    return _resolve(
        request,
        call,
        lambda: port.mark_not_done(call_id, actor=actor_of(request), via=VIA),
        done="Marked not done",
    )


def _resolve(
    request: HttpRequest,
    call: ToolCall,
    apply: Callable[[], object],
    *,
    done: str,
    form: MarkDoneForm | None = None,
) -> HttpResponse:
    try:
        DecisionThrottle(actor_of(request)).check()
        apply()
    except AgentCoreError as exc:
        call.refresh_from_db()
        shown = _page(
            request, call=call, form=form, error=_refusal_text(exc, call), status=exc.status_code
        )
        return retry_after(shown, exc)
    messages.success(request, f"{done}: {call.tool_name} ({call.pk}).")
    return redirect("console:in_doubt")


def _refusal_text(exc: AgentCoreError, call: ToolCall) -> str:
    if isinstance(exc, NotApprover):
        if not call.approver:
            return "You may not resolve this call: the approval policy does not let you."
        approver = "the requester" if call.approver == "requester" else call.approver
        return f"You may not resolve this call: it waits on {approver}."
    if isinstance(exc, AlreadyDecided | RunNotActive):
        return explain_resolved(call)
    return exc.message
