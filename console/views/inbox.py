"""The decisions of the inbox's cards (its list is ``inbox_list``).

Every decision goes through the approval port with ``via="console"``; the port authorizes,
decides and audits. A refusal is shown on the card it concerns, with the HTTP status it means.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from agent_core.actors import Actor
from agent_core.api.throttles import DecisionThrottle
from agent_core.engine import clock
from agent_core.exceptions import AgentCoreError
from agent_core.models import ToolCall
from approvals import amendments
from approvals import services as port
from approvals.exceptions import InvalidDecision
from approvals.models import Action

from ..access import console_view, member_view
from ..bidi import visible
from ..cards import Card, answer_form_for, card_for, explain, refusal
from ..forms import ApproveForm, EditArgsForm, ExtendForm, RejectForm, RememberForm
from ..in_doubt import explain_resolved, was_resolved
from .common import VIA, actor_of, call_to_decide, is_fragment, page, retry_after, tool_call_or_404


@member_view
def call_state(request: HttpRequest, call_id: str) -> HttpResponse:
    """What became of a call, in a sentence: for a card the page kept while it was worked on."""
    call = tool_call_or_404(request, call_id)
    said = explain_resolved(call) if was_resolved(call) else explain(call)
    return HttpResponse(said, content_type="text/plain; charset=utf-8")


@require_POST
@member_view
def approve(request: HttpRequest, call_id: str) -> HttpResponse:
    """Approve (``remember=on``: and remember it for this tool in this thread)."""
    form = ApproveForm(request.POST)
    form.is_valid()  # a checkbox: always valid
    remember = bool(form.cleaned_data.get("remember"))
    return _decide(
        request,
        call_id,
        "approve",
        lambda call: port.approve(call.pk, actor=actor_of(request), remember=remember, via=VIA),
        done="Approved and remembered for this thread" if remember else "Approved",
    )


@require_POST
@member_view
def remember(request: HttpRequest, call_id: str) -> HttpResponse:
    """Approve and remember for the later calls a scope covers ("Remember for…")."""
    form = RememberForm(request.POST, auto_id=f"id_%s_remember_{call_id}")
    return _decide(
        request,
        call_id,
        "remember",
        lambda call: port.approve(call.pk, actor=actor_of(request), remember=form.scope(), via=VIA),
        done="Approved and remembered for the calls its scope covers",
        form=form,
    )


@require_POST
@member_view
def reject(request: HttpRequest, call_id: str) -> HttpResponse:
    """Reject with a reason."""
    form = RejectForm(request.POST, auto_id=f"id_%s_reject_{call_id}")
    return _decide(
        request,
        call_id,
        "reject",
        lambda call: port.reject(
            call.pk, actor=actor_of(request), reason=form.cleaned_data["reason"], via=VIA
        ),
        done="Rejected",
        form=form,
    )


@require_POST
@member_view
def edit(request: HttpRequest, call_id: str) -> HttpResponse:
    """Approve with edited arguments, in two steps: the first shows the changes field by field
    with the policy's answer for the edited call, and decides nothing; the second (``confirm``)
    approves exactly what was shown."""
    form = EditArgsForm(request.POST, auto_id=f"id_%s_edit_{call_id}")
    if "confirm" not in request.POST:
        return _preview_edit(request, call_id, form)
    return _decide(
        request,
        call_id,
        "edit",
        lambda call: port.approve(
            call.pk, actor=actor_of(request), args=form.cleaned_data["args"], via=VIA
        ),
        done="Approved with edited arguments",
        form=form,
    )


@require_POST
@member_view
def answer(request: HttpRequest, call_id: str) -> HttpResponse:
    """Answer a human question with the form generated from its answer schema."""
    call = call_to_decide(request, call_id, Action.ANSWER)
    form = answer_form_for(call, request.POST)
    return _decide(
        request,
        call_id,
        "answer",
        lambda call: port.answer(
            call.pk, actor=actor_of(request), answer=_answer_of(form), via=VIA
        ),
        done="Answered",
        form=form,
    )


@require_POST
@console_view
def extend(request: HttpRequest, call_id: str) -> HttpResponse:
    """Push a pending request's deadline back (+15 min, +1 hour, +1 day from its deadline)."""
    form = ExtendForm(request.POST, auto_id=f"id_%s_extend_{call_id}")
    return _decide(
        request,
        call_id,
        "extend",
        lambda call: amendments.extend(
            call.pk,
            actor=actor_of(request),
            expires_at=(call.expires_at or clock.now()) + form.step,
            via=VIA,
        ),
        done=_extended,
        form=form,
    )


def _preview_edit(request: HttpRequest, call_id: str, form: EditArgsForm) -> HttpResponse:
    actor = actor_of(request)
    call = tool_call_or_404(request, call_id)
    card = card_for(actor, call, data=request.POST, form="edit")
    if not form.is_valid():
        card.error = "Check the form: nothing was decided."
        return _card_response(request, card, status=400)
    try:
        card.edit_preview = port.preview_edit(call.pk, actor=actor, args=form.cleaned_data["args"])
    except AgentCoreError as exc:
        card.error = refusal(exc, call)
        card.errors = _field_errors(exc)
        return _card_response(request, card, status=exc.status_code)
    response = _card_response(request, card, status=200)
    response["X-Console-Card"] = "1"  # the page's script shows it in place of the card
    return response


def _extended(outcome: port.Outcome) -> str:
    deadline = outcome.call.expires_at
    assert deadline is not None  # a deadline was extended
    return f"Extended until {timezone.localtime(deadline):%Y-%m-%d %H:%M %Z}"


def _answer_of(form: Any) -> dict[str, Any]:
    return {k: v for k, v in form.cleaned_data.items() if v is not None}


def _decide(
    request: HttpRequest,
    call_id: str,
    form_name: str,
    apply: Callable[[ToolCall], Any],
    *,
    done: str | Callable[[Any], str],
    form: Any = None,
) -> HttpResponse:
    actor = actor_of(request)
    call = call_to_decide(request, call_id, _ACTION[form_name])
    if form is not None and not form.is_valid():
        card = card_for(actor, call, data=request.POST, form=form_name)
        card.error = "Check the form: nothing was decided."
        return _card_response(request, card, status=400)
    try:
        DecisionThrottle(actor).check()  # the API's rate: one per actor, whatever the surface
        outcome = apply(call)
    except AgentCoreError as exc:
        call.refresh_from_db()
        card = card_for(actor, call, data=request.POST, form=form_name)
        card.error = refusal(exc, call)
        card.errors = _field_errors(exc)
        return retry_after(_card_response(request, card, status=exc.status_code), exc)
    if outcome.result == port.Result.UNCHANGED:
        call.refresh_from_db()
        return _unchanged(request, _unchanged_text(call, actor, form_name))
    if callable(done):
        done = done(outcome)
    said = f"{done}: {named(call)}."
    if is_fragment(request):
        return HttpResponse(format_html('<div class="flash ok" role="status">{}</div>', said))
    messages.success(request, said)
    return redirect("console:inbox")


def named(call: ToolCall) -> str:
    """A call as a flash message names it: its tool and summary (its id without a summary)."""
    said = f"{call.tool_name} — {call.summary}" if call.summary else f"{call.tool_name} ({call.pk})"
    return visible(said)


# The decision each form asks for, and what the viewer's own attempt was, by the form.
_ACTION = {
    "approve": Action.APPROVE,
    "edit": Action.APPROVE,
    "remember": Action.APPROVE,
    "reject": Action.REJECT,
    "answer": Action.ANSWER,
    "extend": Action.EXTEND,
}
_ATTEMPT = {
    "approve": "approval",
    "edit": "approval",
    "remember": "approval",
    "reject": "rejection",
    "answer": "answer",
}


def _unchanged_text(call: ToolCall, actor: Actor, form_name: str) -> str:
    """An identical repeat (a stale tab): who decided and when; "Approved" is for one's own."""
    said = explain(call)
    if call.decided_by_ref == actor.ref:
        return f"Already done: {said} Nothing more was sent."
    return f"{said} Your {_ATTEMPT.get(form_name, 'decision')} changed nothing."


def _unchanged(request: HttpRequest, text: str) -> HttpResponse:
    if is_fragment(request):
        return HttpResponse(
            format_html('<div class="flash warn" role="status" data-unchanged>{}</div>', text)
        )
    messages.warning(request, text)
    return redirect("console:inbox")


def _field_errors(exc: AgentCoreError) -> list[str]:
    details = exc.errors if isinstance(exc, InvalidDecision) and exc.errors else []
    return [f"{'.'.join(str(p) for p in e.get('loc', ())) or 'value'}: {e['msg']}" for e in details]


def _card_response(request: HttpRequest, card: Card, *, status: int) -> HttpResponse:
    if is_fragment(request):
        return render(request, "console/partials/card.html", {"card": card}, status=status)
    return page(request, "console/decision.html", {"card": card}, status=status)
