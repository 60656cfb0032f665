"""The chat REST API (SPEC §8): parse the request, call a service, shape the answer.

The live stream (``GET /agent/chat/<run_id>/stream``) is an async view in
``agent_core.streams.sse``.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Prefetch, QuerySet
from django.urls import reverse
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
)
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.fields import empty
from rest_framework.request import Request
from rest_framework.response import Response

from ..conversation import history, idempotency, turns
from ..engine import cancel
from ..engine.access import check_may_manage, visible_runs, visible_threads
from ..exceptions import InvalidHeader, NotFound, RunActive
from ..gate import TextReply, text_decision
from ..ids import ID_REGEX
from ..models import Message, QueuedMessage, Run, Thread, ToolCall
from . import serializers
from .actors import request_actor
from .base import AirlockAPIView, extend_schema
from .filters import RunFilter, ThreadFilter
from .pagination import KeysetPagination
from .throttles import ChatThrottle

_ERRORS = {
    400: OpenApiResponse(description="invalid body: `{code, detail, errors}`"),
    401: OpenApiResponse(description="no actor"),
    403: OpenApiResponse(description="not allowed"),
    404: OpenApiResponse(description="unknown, or not yours to see"),
}


class ChatView(AirlockAPIView):
    """Start a turn: a new thread, or the next turn of one of your threads."""

    throttle_classes = [ChatThrottle]

    @extend_schema(
        examples=[
            OpenApiExample(
                "a new thread",
                value={"agent": "support", "message": "Where is order A-1001?"},
                request_only=True,
            )
        ],
        request=serializers.ChatStartSerializer,
        parameters=[
            OpenApiParameter(
                "Idempotency-Key",
                location=OpenApiParameter.HEADER,
                description="Makes a retried start safe: the same key and body answer the "
                "first request's 202 again (`Idempotency-Status: replay`) and start nothing.",
            ),
            OpenApiParameter(
                "Idempotency-Status",
                location=OpenApiParameter.HEADER,
                enum=["replay"],
                description="`replay`: this is the stored answer of an earlier request",
                response=[202],
            ),
            OpenApiParameter(
                "Retry-After",
                type=int,
                location=OpenApiParameter.HEADER,
                description="seconds to wait before trying again",
                response=[409, 429],
            ),
        ],
        responses={
            202: PolymorphicProxySerializer(
                component_name="ChatAccepted",
                serializers=[
                    serializers.ChatStartedSerializer,
                    serializers.ChatQueuedSerializer,
                    serializers.ChatDecidedSerializer,
                ],
                resource_type_field_name=None,
            ),
            409: OpenApiResponse(
                description="`run_active`: the thread is busy (mode `reject`, or `regenerate`); "
                "`run_busy` (with `Retry-After`): a request with this Idempotency-Key has not "
                "finished yet"
            ),
            413: OpenApiResponse(description="`body_too_large`"),
            422: OpenApiResponse(
                description="`idempotency_key_reused`: the key came with another body"
            ),
            429: OpenApiResponse(
                description="`throttled`, `quota_exceeded` or `queue_full`, with `Retry-After`"
            ),
            **_ERRORS,
        },
    )
    def post(self, request: Request) -> Response:
        actor = request_actor(request)
        body = serializers.ChatStartSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        key = request.headers.get("Idempotency-Key")
        if key is not None and not 0 < len(key) <= idempotency.MAX_KEY_LENGTH:
            raise InvalidHeader(
                f"Idempotency-Key must be 1 to {idempotency.MAX_KEY_LENGTH} characters"
            )
        thread_id = body.validated_data.get("thread_id")
        thread: Thread | None = None
        if thread_id is not None:
            thread = visible_threads(actor).filter(pk=thread_id).first()
            if thread is None:
                raise NotFound(f"no thread {thread_id}")
            check_may_manage(actor, thread)

        def start() -> dict[str, Any]:
            started: Run | turns.Queued
            if body.validated_data["regenerate"]:
                assert thread is not None  # the serializer requires a thread_id
                agent = body.validated_data.get("agent")
                started = history.regenerate(thread, actor=actor, agent=agent)
            else:
                if thread is not None:
                    reply = text_decision(actor, thread, body.validated_data["message"])
                    if reply is not None:
                        return _decided_by_text(reply, thread.pk)
                started = turns.start_turn(
                    agent=body.validated_data["agent"],
                    message=body.validated_data["message"],
                    actor=actor,
                    thread_id=thread_id,
                    mode=turns.Mode(body.validated_data["mode"]),
                )
            if isinstance(started, turns.Queued):
                return {
                    "queued": True,
                    "position": started.position,
                    "message_id": started.message.pk,
                    "thread_id": started.message.thread_id,
                }
            stream_url = reverse("agent_core_api:chat-stream", args=[started.pk])
            return {"run_id": started.pk, "thread_id": started.thread_id, "stream_url": stream_url}

        if key is None:
            return Response(start(), status=status.HTTP_202_ACCEPTED)
        answer = idempotency.start_once(actor.ref, key, dict(body.validated_data), start)
        headers = {"Idempotency-Status": "replay"} if answer.replay else None
        return Response(answer.body, status=status.HTTP_202_ACCEPTED, headers=headers)


def _decided_by_text(reply: TextReply, thread_id: str) -> dict[str, Any]:
    stream_url = reverse("agent_core_api:chat-stream", args=[reply.run_id]) if reply.run_id else ""
    return {
        "decided": bool(reply.tool_call_id),
        "reply": reply.text,
        "thread_id": thread_id,
        "tool_call_id": reply.tool_call_id,
        "status": reply.status,
        "outcome": reply.outcome,
        "run_id": reply.run_id,
        "stream_url": stream_url,
    }


class CancelView(AirlockAPIView):
    """Cancel a run (guarantee 11); a finished run answers 202 with its status, unchanged."""

    @extend_schema(
        request=None,
        responses={202: serializers.RunStatusSerializer, **_ERRORS},
    )
    def post(self, request: Request, run_id: str) -> Response:
        run = cancel.request_cancel(run_id, actor=request_actor(request))
        return Response({"status": run.status}, status=status.HTTP_202_ACCEPTED)


class ThreadViewSet(
    AirlockAPIView,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet[Thread],
):
    """Your threads (newest first); one with its transcript; rename, fork, truncate, or delete one
    that is idle."""

    pagination_class = KeysetPagination  # newest first
    filter_backends = [DjangoFilterBackend]
    filterset_class = ThreadFilter
    lookup_value_regex = ID_REGEX

    def get_queryset(self) -> QuerySet[Thread]:
        if getattr(self, "swagger_fake_view", False):  # drf-spectacular reading the shape
            return Thread.objects.none()
        actor = request_actor(self.request)
        if self.action == "list":
            return Thread.objects.filter(owner_ref=actor.ref)
        calls = ToolCall.objects.order_by("position")
        messages = Message.objects.order_by("seq").prefetch_related(
            Prefetch("tool_calls", queryset=calls)
        )
        return visible_threads(actor).prefetch_related(Prefetch("messages", queryset=messages))

    def get_serializer_class(self) -> type[serializers.ThreadSerializer]:
        if self.action == "retrieve":
            return serializers.ThreadDetailSerializer
        return serializers.ThreadSerializer

    def _managed(self, request: Request) -> Thread:
        """The thread of the URL, if the actor may see it (else 404) and manage it (else 403)."""
        thread = self.get_object()
        check_may_manage(request_actor(request), thread)
        return thread

    @extend_schema(
        request=serializers.RenameSerializer,
        responses={200: serializers.ThreadSerializer, **_ERRORS},
    )
    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Rename a thread (its owner only)."""
        thread = self._managed(request)
        body = serializers.RenameSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        thread = history.rename(thread, body.validated_data["title"])
        return Response(serializers.ThreadSerializer(thread).data)

    @extend_schema(
        request=serializers.ForkSerializer,
        responses={
            201: serializers.ThreadSerializer,
            404: OpenApiResponse(
                description="`not_found`: no such thread or message, or not yours to see"
            ),
            **{code: answer for code, answer in _ERRORS.items() if code != 404},
        },
    )
    @action(detail=True, methods=["post"], url_path="fork")
    def fork(self, request: Request, pk: str) -> Response:
        """A new thread of yours with this thread's messages up to and including `message_id`
        and the calls that had ended by then (copied, never re-run; calls still open are left
        out). Anyone who may see the thread may fork it; the new thread says `forked_from`."""
        thread = self.get_object()
        body = serializers.ForkSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        forked = history.fork(
            thread, body.validated_data["message_id"], actor=request_actor(request)
        )
        return Response(serializers.ThreadSerializer(forked).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        request=None,
        parameters=[
            OpenApiParameter(
                "from",
                required=True,
                description="the first message to drop; every later one goes with it",
            )
        ],
        responses={
            200: serializers.TruncatedSerializer,
            409: OpenApiResponse(description="`run_active`: cancel its run first"),
            **_ERRORS,
        },
    )
    @action(detail=True, methods=["delete"], url_path="messages")
    def truncate(self, request: Request, pk: str) -> Response:
        """Drop a message and every later one from what the model reads next. Their runs,
        calls, frames and audit rows stay, marked `dropped_at`."""
        thread = self._managed(request)
        try:
            message_id = serializers.MESSAGE_ID.run_validation(
                request.query_params.get("from", empty)
            )
        except ValidationError as exc:
            raise ValidationError({"from": exc.detail}) from exc
        return Response({"dropped": history.truncate(thread, message_id)})

    @extend_schema(
        responses={
            204: None,
            409: OpenApiResponse(description="`run_active`: cancel its run first"),
            **_ERRORS,
        }
    )
    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Delete a thread with its runs, calls and frames; refused while a run is active."""
        actor = request_actor(request)
        thread = self.get_object()
        check_may_manage(actor, thread)
        with transaction.atomic():
            locked = Thread.objects.select_for_update().get(pk=thread.pk)
            if locked.active_run_id is not None:
                raise RunActive()
            locked.delete()
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(responses={200: serializers.QueuedMessageSerializer(many=True), **_ERRORS})
    @action(detail=True, methods=["get"], url_path="queue", pagination_class=None)
    def queue(self, request: Request, pk: str) -> Response:
        """The thread's queued messages, in the order they will start."""
        thread = self.get_object()
        rows = serializers.QueuedMessageSerializer(
            QueuedMessage.objects.waiting(thread.pk), many=True
        )
        return Response(rows.data)

    @extend_schema(
        request=None,
        responses={
            204: None,
            409: OpenApiResponse(description="`turn_started`: it has started (or was withdrawn)"),
            **_ERRORS,
        },
    )
    @action(
        detail=True,
        methods=["delete"],
        url_path=r"queue/(?P<message_id>[^/]+)",
        url_name="queue-withdraw",
    )
    def withdraw(self, request: Request, pk: str, message_id: str) -> Response:
        """Withdraw a queued message before it starts."""
        actor = request_actor(request)
        thread = self.get_object()
        check_may_manage(actor, thread)
        turns.withdraw(thread.pk, message_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class RunViewSet(AirlockAPIView, viewsets.ReadOnlyModelViewSet[Run]):
    """Runs you may see (newest first, filterable); one with its steps and calls."""

    pagination_class = KeysetPagination  # newest first
    filter_backends = [DjangoFilterBackend]
    filterset_class = RunFilter
    lookup_value_regex = ID_REGEX

    def get_queryset(self) -> QuerySet[Run]:
        if getattr(self, "swagger_fake_view", False):
            return Run.objects.none()
        runs = visible_runs(request_actor(self.request))
        if self.action == "retrieve":
            runs = runs.prefetch_related(
                Prefetch("steps"), Prefetch("tool_calls", queryset=ToolCall.objects.all())
            )
        return runs

    def get_serializer_class(self) -> type[serializers.RunSerializer]:
        if self.action == "retrieve":
            return serializers.RunDetailSerializer
        return serializers.RunSerializer
