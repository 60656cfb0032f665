"""Operators' hands on a waiting call they need not decide: Nudge (tell its deciders again) and
Escalate now (to the role its policy names). Both are the approval app's, audited there."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from agent_core.exceptions import AgentCoreError
from approvals import escalation
from approvals.nudge import nudge as nudge_call

from ..access import console_view
from .common import actor_of, tool_call_or_404

VIA = "console"


@require_POST
@console_view
def nudge(request: HttpRequest, call_id: str) -> HttpResponse:
    """Notify the call's deciders again."""
    call = tool_call_or_404(request, call_id)
    try:
        told = nudge_call(call.pk, actor=actor_of(request), via=VIA)
    except AgentCoreError as refusal:
        messages.error(request, f"Nobody was nudged: {refusal.message}")
        return redirect("console:call", call.pk)
    messages.success(request, f"Nudged: {told} notifications of {call.tool_name} sent again.")
    return redirect("console:call", call.pk)


@require_POST
@console_view
def escalate(request: HttpRequest, call_id: str) -> HttpResponse:
    """Escalate the call now to the role its policy names."""
    call = tool_call_or_404(request, call_id)
    try:
        escalation.escalate_now(call.pk, actor=actor_of(request), via=VIA)
    except AgentCoreError as refusal:
        messages.error(request, f"Nothing was escalated: {refusal.message}")
        return redirect("console:call", call.pk)
    messages.success(request, f"Escalated {call.tool_name}.")
    return redirect("console:call", call.pk)
