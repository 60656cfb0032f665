"""``useChat`` against Airlock: the AI SDK's HTTP chat transport, as ``DefaultChatTransport``
speaks it.

``POST /agent/ui-chat`` takes what ``useChat`` sends, ``{id, messages, trigger, messageId}`` (plus
the transport's ``body``, e.g. ``{"agent": "support"}``), and answers with the UI message stream
(``agent_core.streams.aisdk``):

* the last message is the user's: it is the next turn of the chat's thread (a new thread, under
  the client's ``id``, the first time), streamed from its start;
* the last message is the assistant's, with tool parts the user answered
  (``addToolApprovalResponse``: state ``approval-responded``, ``approval: {id, approved,
  reason}``): each answer is decided through the approval port (``via="ai-sdk"``, the same
  authorization as every surface), and the run is streamed from there.

Each response ends when the run ends or waits on a person: the client answers with its next
request, as with an AI SDK server whose step ended on an approval request.
``GET /agent/ui-chat/<id>/stream`` is the transport's ``reconnectToStream``: the chat's active run
replayed (from ``Last-Event-ID`` / ``?after``, else from its start), 204 when it has none.
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import OpenApiExample, OpenApiResponse
from rest_framework import serializers
from rest_framework.request import Request

from agent_core import ids
from agent_core.actors import Actor
from agent_core.agents import registered_agents
from agent_core.api import generator
from agent_core.api.actors import request_actor
from agent_core.api.base import AirlockAPIView, extend_schema
from agent_core.api.throttles import ChatThrottle
from agent_core.conversation import turns
from agent_core.exceptions import NotFound, RunActive
from agent_core.gate import TextReply, text_decision
from agent_core.ids import ID_REGEX
from agent_core.models import ChatAlias, Run, Thread, ToolCall
from agent_core.streams import aisdk, live, sse

from .. import services

VIA = "ai-sdk"
MAX_TEXT = 32_000


class UIChatSerializer(serializers.Serializer[Any]):
    """What ``useChat`` posts; only the last message is read (the thread keeps the history)."""

    id = serializers.RegexField(rf"^{ID_REGEX}$", help_text="the chat's id, as the client names it")
    messages = serializers.ListField(child=serializers.DictField(), min_length=1)
    trigger = serializers.ChoiceField(
        choices=["submit-message"],
        default="submit-message",
        help_text="`regenerate-message` is not supported: a run's answer is never re-run",
    )
    messageId = serializers.CharField(required=False, allow_null=True, allow_blank=True)
    agent = serializers.CharField(
        max_length=100, required=False, help_text="a new chat's agent (else: the only one)"
    )

    def validate_messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        last = messages[-1]
        if last.get("role") not in ("user", "assistant"):
            raise serializers.ValidationError(
                "The last message must be the user's or the assistant's."
            )
        parts = last.get("parts")
        if not isinstance(parts, list) or not all(isinstance(p, dict) for p in parts):
            raise serializers.ValidationError("The last message's parts must be a list of objects.")
        return messages


class UIChatView(AirlockAPIView):
    """``POST /agent/ui-chat``: a ``useChat`` request, answered with the UI message stream."""

    throttle_classes = [ChatThrottle]

    @extend_schema(
        request=UIChatSerializer,
        examples=[
            OpenApiExample(
                "a user message",
                value={
                    "id": "k3VwZq0sJmWQbH5a",
                    "messages": [
                        {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hello"}]}
                    ],
                    "trigger": "submit-message",
                    "agent": "support",
                },
                request_only=True,
            )
        ],
        responses={
            (200, "text/event-stream"): OpenApiResponse(
                response=generator.EVENT_SCHEMA,
                description="The run's UI message stream (header `x-vercel-ai-ui-message-stream: "
                "v1`), up to its end or until it waits on a person; then `data: [DONE]`.",
            ),
            403: OpenApiResponse(description="`not_approver`: an answer you may not give"),
            404: OpenApiResponse(description="an answered call that is not this chat's"),
            409: OpenApiResponse(
                description="`run_active`: the chat's run is still working; "
                "`already_decided` / `run_not_active`"
            ),
            410: OpenApiResponse(description="`approval_expired`"),
            413: OpenApiResponse(description="`body_too_large`: send the last message only"),
            429: OpenApiResponse(description="`throttled` or `quota_exceeded`, with `Retry-After`"),
        },
    )
    def post(self, request: Request) -> HttpResponseBase:
        actor = request_actor(request)
        body = UIChatSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        chat_id: str = body.validated_data["id"]
        last: dict[str, Any] = body.validated_data["messages"][-1]
        thread = chat_thread(actor, chat_id)
        if last["role"] == "user":
            text = _text(last)
            reply = text_decision(actor, thread, text) if thread is not None else None
            if reply is not None:
                return _replied(reply)
            run = _start(actor, chat_id, thread, text, body.validated_data.get("agent"))
            return aisdk.stream_response(run, 0, until_parked=True)
        run, after = _decide(actor, thread, last)
        return aisdk.stream_response(run, after, until_parked=True)


def chat_thread(actor: Actor, chat_id: str) -> Thread | None:
    """The actor's thread the client calls ``chat_id``: its alias, or a thread id of its own."""
    alias = ChatAlias.objects.filter(owner_ref=actor.ref, chat_id=chat_id).select_related("thread")
    found = alias.first()
    if found is not None:
        return found.thread
    return Thread.objects.filter(pk=chat_id, owner_ref=actor.ref).first()


def _text(message: dict[str, Any]) -> str:
    text = "\n".join(
        str(p.get("text", "")) for p in message["parts"] if p.get("type") == "text"
    ).strip()
    if not text or len(text) > MAX_TEXT:
        raise serializers.ValidationError(
            {"messages": [f"The user's message needs text (at most {MAX_TEXT} characters)."]}
        )
    return text


def _start(actor: Actor, chat_id: str, thread: Thread | None, text: str, agent: str | None) -> Run:
    if thread is not None:
        agent = thread.agent
    elif agent is None:
        agents = list(registered_agents())
        if len(agents) != 1:
            raise serializers.ValidationError({"agent": ["Name the agent of a new chat."]})
        agent = agents[0]
    try:
        with transaction.atomic():
            run = turns.start_turn(
                agent=agent, message=text, actor=actor, thread_id=thread.pk if thread else None
            )
            assert isinstance(run, Run), "mode reject starts a run or refuses"
            if thread is None:
                ChatAlias.objects.create(owner_ref=actor.ref, chat_id=chat_id, thread=run.thread)
    except IntegrityError as exc:  # the same new chat posted twice at once
        raise RunActive("this chat's first message is being started by another request") from exc
    return run


def _replied(reply: TextReply) -> HttpResponseBase:
    """A text decision's answer: the run it lets go on, streamed whole (a new message the client
    reads from its first frame, its calls' inputs included); or, when it decided nothing, its
    reply as one message."""
    if not reply.run_id:
        return aisdk.reply_response(reply.text, ids.new_id("msg"))
    return aisdk.stream_response(Run.objects.get(pk=reply.run_id), 0, until_parked=True)


_RESPONDED = "approval-responded"


def _decide(actor: Actor, thread: Thread | None, message: dict[str, Any]) -> tuple[Run, int]:
    """Decide the answers of ``message``'s tool parts; the run, and the frame to stream after."""
    answers = [
        (p["toolCallId"], p["approval"])
        for p in message["parts"]
        if p.get("state") == _RESPONDED
        and isinstance(p.get("toolCallId"), str)
        and isinstance(p.get("approval"), dict)
        and isinstance(p["approval"].get("approved"), bool)
    ]
    if not answers:
        raise serializers.ValidationError(
            {"messages": ["The assistant's message carries no approval responses."]}
        )
    call_ids = {call_id for call_id, _ in answers}
    calls = ToolCall.objects.filter(pk__in=call_ids, thread=thread) if thread else None
    found = dict(calls.values_list("pk", "run_id")) if calls is not None else {}
    # Every answered call must be this chat's, all of one run; anything else is unknown here.
    if set(found) != call_ids or len(set(found.values())) != 1:
        raise NotFound("no such approval request in this chat")
    run = Run.objects.get(pk=next(iter(found.values())))
    after = run.last_seq  # stream what the answers bring about, not what the client has
    for call_id, approval in answers:
        if approval["approved"]:
            services.approve(call_id, actor=actor, via=VIA)
        else:
            reason = str(approval.get("reason") or "")[:4096]
            services.reject(call_id, actor=actor, reason=reason, via=VIA)
    return run, after


def _active_run_id(actor: Actor, chat_id: str) -> str | None:
    thread = chat_thread(actor, chat_id)
    return thread.active_run_id if thread is not None else None


@csrf_exempt  # it only reads (GET); any other method is a JSON 405 (sse.authenticate)
async def ui_chat_stream_view(request: HttpRequest, chat_id: str) -> HttpResponseBase:
    """``GET /agent/ui-chat/<id>/stream``: resume the chat's active run, or 204."""
    actor = await sse.authenticate(request)
    if not isinstance(actor, Actor):
        return actor
    run_id = await live.read(_active_run_id, actor, chat_id)
    if run_id is None:
        return HttpResponse(status=204)  # the transport's "no active stream": nothing to resume
    attached = await sse.attach_as(request, actor, run_id)
    if not isinstance(attached, tuple):
        return attached
    run, after = attached
    return aisdk.stream_response(run, after, until_parked=True)


generator.SSE_OPERATIONS["approvals_api:ui-chat-stream"] = {
    **generator.UI_STREAM_OPERATION,
    "operationId": "ui_chat_stream",
    "summary": "Resume a useChat chat's stream (the AI SDK transport's reconnectToStream)",
    "description": (
        "The chat's active run in the UI message stream protocol, from its start (or after "
        "`?after` / `Last-Event-ID`), until it ends or waits on a person; 204 when the chat has "
        "no active run (or is not yours)."
    ),
    "parameters": [
        {"name": "chat_id", "in": "path", "required": True, "schema": {"type": "string"}},
        *generator.UI_STREAM_OPERATION["parameters"][1:],
    ],
    "responses": {
        **generator.UI_STREAM_OPERATION["responses"],
        "204": {"description": "no active run to resume"},
    },
}
