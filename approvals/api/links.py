"""``/agent/links/<approve|reject|answer>/<token>``: the pages a signed decision link opens.

A person opens these from an email or a chat message in a browser, so they answer HTML (with the
status a JSON client would get). GET shows a confirmation page and never decides, nor audits: a
refused link's page is only rate limited (``APPROVALS["LINK_REFUSAL_RATE"]`` per client address,
then 429 ``throttled``), so anonymous GETs cannot fill the audit. POST spends the link and decides
through the approval port (``approvals.links``). An ``answer`` link's GET shows a form with one
text field per property of the question's answer schema; its POST answers.
"""

from __future__ import annotations

import json
from typing import Any, cast

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle
from rest_framework.views import APIView

from agent_core.actors import Actor, actor_for_user
from agent_core.agents import get_agent
from agent_core.exceptions import AgentCoreError, RetryAfter, Throttled
from agent_core.models import ToolCall

from .. import grants, links
from ..conf import approvals_settings
from ..models import Action
from ..notify.notice import contact_of
from ..policy import get_policy


class LinkRefusalThrottle(SimpleRateThrottle):
    """Counts the refused link pages one client address opened."""

    scope = "link_refusal"

    def get_rate(self) -> str | None:
        return approvals_settings().LINK_REFUSAL_RATE

    def get_cache_key(self, request: Any, view: Any) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


@require_http_methods(["GET", "POST"])
def link_page(request: HttpRequest, action: str, token: str) -> HttpResponse:
    """Confirm (GET) or decide (POST) with one signed link."""
    if action == Action.ANSWER:
        return _answer_page(request, token)
    signed_in = actor_for_user(request.user) if request.user.is_authenticated else None
    try:
        if request.method == "GET":
            return _confirm(request, action, token, signed_in)
        reason = request.POST.get("reason", "")[:4096]
        outcome = links.use(
            action, token, signed_in=signed_in, reason=reason, remember=_remember(request)
        )
    except AgentCoreError as refusal:
        return _refused(request, refusal, action)
    return render(request, "approvals/links/done.html", {"action": action, "outcome": outcome})


def _confirm(
    request: HttpRequest, action: str, token: str, signed_in: Actor | None
) -> HttpResponse:
    try:
        link = links.read(action, token)
    except links.LinkRefused as refusal:
        throttle = LinkRefusalThrottle()
        # A DRF throttle outside a DRF view: it reads only the request's address.
        if not throttle.allow_request(Request(request), cast(APIView, None)):
            raise Throttled(retry_after=int(throttle.wait() or 1)) from refusal
        raise
    call = ToolCall.objects.filter(pk=link.tool_call_id).first()
    person = links.actor_of(link.actor_ref)
    refused = links.refusal(link, person, call, signed_in=signed_in)
    if refused is not None:
        raise refused
    name = contact_of(link.actor_ref).name or link.actor_ref
    context: dict[str, Any] = {"link": link, "call": call, "person": person, "name": name}
    context["rememberable"] = call is not None and _rememberable(call)
    context["pins"] = json.dumps(call.args, indent=2) if call else ""
    return render(request, "approvals/links/confirm.html", context)


def _refused(request: HttpRequest, refusal: AgentCoreError, action: str) -> HttpResponse:
    context = {"code": refusal.code, "message": refusal.message, "action": action}
    response = render(request, "approvals/links/refused.html", context, status=refusal.status_code)
    if isinstance(refusal, RetryAfter):
        response["Retry-After"] = str(refusal.retry_after)
    return response


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
