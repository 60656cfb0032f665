"""``/agent/links/<approve|reject|answer>/<token>``: the pages a signed decision link opens.

A person opens these from an email or a chat message in a browser, so they answer HTML (with the
status a JSON client would get). GET shows a confirmation page and never decides; POST spends the
link and decides through the approval port (``approvals.links``). An ``answer`` link's GET shows
a form with one text field per property of the question's answer schema; its POST answers.
"""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from agent_core.agents import get_agent
from agent_core.exceptions import AgentCoreError
from agent_core.models import ToolCall

from .. import links
from ..models import Action


@require_http_methods(["GET", "POST"])
def link_page(request: HttpRequest, action: str, token: str) -> HttpResponse:
    """Confirm (GET) or decide (POST) with one signed link."""
    if action == Action.ANSWER:
        return _answer_page(request, token)
    try:
        if request.method == "GET":
            link = links.check(action, token)
            call = ToolCall.objects.filter(pk=link.tool_call_id).first()
            context: dict[str, Any] = {"link": link, "call": call}
            context["person"] = links.actor_of(link.actor_ref)
            return render(request, "approvals/links/confirm.html", context)
        outcome = links.use(action, token, reason=request.POST.get("reason", "")[:4096])
    except AgentCoreError as refusal:
        context = {"code": refusal.code, "message": refusal.message, "action": action}
        return render(request, "approvals/links/refused.html", context, status=refusal.status_code)
    return render(request, "approvals/links/done.html", {"action": action, "outcome": outcome})


def _answer_page(request: HttpRequest, token: str) -> HttpResponse:
    """The form of a question (GET), or its answer (POST)."""
    try:
        link = links.check(Action.ANSWER, token)
        call = ToolCall.objects.select_related("run").get(pk=link.tool_call_id)
        fields = _answer_fields(call)
        if request.method == "POST":
            answer = {name: _typed(request.POST.get(name, ""), kind) for name, kind in fields}
            outcome = links.use_answer(token, answer)
            return render(
                request, "approvals/links/done.html", {"action": "answer", "outcome": outcome}
            )
    except AgentCoreError as refusal:
        refused = {"code": refusal.code, "message": refusal.message, "action": Action.ANSWER}
        return render(request, "approvals/links/refused.html", refused, status=refusal.status_code)
    person = links.actor_of(link.actor_ref)
    form: dict[str, Any] = {"call": call, "fields": fields, "person": person}
    return render(request, "approvals/links/answer.html", form)


def _answer_fields(call: ToolCall) -> list[tuple[str, str]]:
    """``(name, JSON type)`` of each property of the question's answer schema."""
    schema = get_agent(call.run.agent).get_tool(call.tool_name).answer_schema or {}
    return [(name, str(p.get("type", ""))) for name, p in schema.get("properties", {}).items()]


def _typed(text: str, kind: str) -> Any:
    # A string is what was typed; any other type is read as JSON (the port validates it against
    # the schema and says what is wrong).
    if kind == "string":
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text
