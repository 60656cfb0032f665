"""``/agent/links/<approve|reject>/<token>``: the pages a signed decision link opens.

A person opens these from an email or a chat message in a browser, so they answer HTML (with the
status a JSON client would get). GET shows a confirmation page and never decides; POST spends the
link and decides through the approval port (``approvals.links``).
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

from .. import grants, links
from ..policy import get_policy


@require_http_methods(["GET", "POST"])
def link_page(request: HttpRequest, action: str, token: str) -> HttpResponse:
    """Confirm (GET) or decide (POST) with one signed link."""
    try:
        if request.method == "GET":
            link = links.check(action, token)
            call = ToolCall.objects.filter(pk=link.tool_call_id).first()
            context: dict[str, Any] = {"link": link, "call": call}
            context["person"] = links.actor_of(link.actor_ref)
            context["rememberable"] = call is not None and _rememberable(call)
            context["pins"] = json.dumps(call.args, indent=2) if call else ""
            return render(request, "approvals/links/confirm.html", context)
        outcome = links.use(
            action,
            token,
            reason=request.POST.get("reason", "")[:4096],
            remember=_remember(request),
        )
    except AgentCoreError as refusal:
        context = {"code": refusal.code, "message": refusal.message, "action": action}
        return render(request, "approvals/links/refused.html", context, status=refusal.status_code)
    return render(request, "approvals/links/done.html", {"action": action, "outcome": outcome})


def _remember(request: HttpRequest) -> bool | grants.Scope:
    """What the page's "remember for…" form asks for (parsed before the link is spent)."""
    if request.POST.get("remember") != "scope":
        return False
    post = request.POST
    return grants.from_form(post.get("pins", ""), post.get("uses", ""), post.get("ttl", ""))


def _rememberable(call: ToolCall) -> bool:
    try:
        tool = get_agent(call.run.agent).get_tool(call.tool_name)
    except AgentCoreError:
        return False
    return get_policy().may_remember(tool, call)
