"""Decision endpoints and the pending-approvals inbox: parse, call the port, shape the answer."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.http import Http404
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from agent_core.api.actors import request_actor
from agent_core.api.base import AirlockAPIView, extend_schema
from agent_core.api.throttles import DecisionThrottle
from agent_core.models import ToolCall

from .. import amendments, catalog, pending, quorum, selectors, services
from ..models import RememberedApproval
from .filters import PendingFilter, PendingPagination
from .serializers import (
    AnswerSerializer,
    ApproveSerializer,
    DecisionResultSerializer,
    ExtendSerializer,
    MarkDoneSerializer,
    MarkNotDoneSerializer,
    PendingPageSerializer,
    RejectSerializer,
    RememberedApprovalSerializer,
    SkipSerializer,
    ToolListSerializer,
    ToolsQuerySerializer,
    pending_results,
)


def _body(serializer_class: type[serializers.Serializer[Any]], request: Request) -> Any:
    """The request body validated (400 with each field's errors)."""
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def _decided(outcome: services.Outcome) -> Response:
    """A decision's answer from the call as the decision left it (no read)."""
    call = outcome.call
    return _answer(call, outcome.result, outcome.standing or quorum.standing(call))


def _answer(call: ToolCall, outcome: str, standing: quorum.Standing) -> Response:
    data: dict[str, Any] = {"tool_call_id": call.pk, "status": call.status, "outcome": outcome}
    needed, given = standing
    if needed > 1:
        data.update(approvals=given, approvals_needed=needed)
    data["expires_at"] = call.expires_at
    return Response(DecisionResultSerializer(data).data)


class _DecisionView(AirlockAPIView):
    """A decision: JSON in (forms and multipart are refused with 415), the call's state out."""

    throttle_classes = [DecisionThrottle]


class ApproveView(_DecisionView):
    """``POST /agent/tool-call/approve``."""

    @extend_schema(
        request=ApproveSerializer,
        responses=DecisionResultSerializer,
        examples=[
            OpenApiExample(
                "approve",
                value={"tool_call_id": "tc_01JD3Z8Q6W1K9V4X2M7N5P0R8S", "via": "slack"},
                request_only=True,
            )
        ],
    )
    def post(self, request: Request) -> Response:
        body = _body(ApproveSerializer, request)
        outcome = services.approve(
            body["tool_call_id"],
            actor=request_actor(request),
            remember=body["remember"],
            via=body["via"],
            args=body.get("args"),
        )
        return _decided(outcome)


class RejectView(_DecisionView):
    """``POST /agent/tool-call/reject``."""

    @extend_schema(request=RejectSerializer, responses=DecisionResultSerializer)
    def post(self, request: Request) -> Response:
        body = _body(RejectSerializer, request)
        outcome = services.reject(
            body["tool_call_id"],
            actor=request_actor(request),
            reason=body["reason"],
            via=body["via"],
        )
        return _decided(outcome)


class AnswerView(_DecisionView):
    """``POST /agent/tool-call/answer``."""

    @extend_schema(request=AnswerSerializer, responses=DecisionResultSerializer)
    def post(self, request: Request) -> Response:
        body = _body(AnswerSerializer, request)
        outcome = services.answer(
            body["tool_call_id"],
            actor=request_actor(request),
            answer=body["answer"],
            via=body["via"],
        )
        return _decided(outcome)


class SkipView(_DecisionView):
    """``POST /agent/tool-call/skip``: answer a human tool's question with its defaults."""

    @extend_schema(
        request=SkipSerializer,
        responses={
            200: DecisionResultSerializer,
            409: OpenApiResponse(description="`already_answered`, `run_not_active`"),
        },
    )
    def post(self, request: Request) -> Response:
        body = _body(SkipSerializer, request)
        outcome = services.skip(body["tool_call_id"], actor=request_actor(request), via=body["via"])
        return _decided(outcome)


class ToolsView(AirlockAPIView):
    """``GET /agent/tools?agent=<name>``: an agent's tools and how their calls are decided."""

    @extend_schema(
        parameters=[OpenApiParameter("agent", str, required=True)],
        responses={
            200: ToolListSerializer,
            404: OpenApiResponse(description="`agent_not_found`"),
        },
    )
    def get(self, request: Request) -> Response:
        query = ToolsQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        name = query.validated_data["agent"]
        data = {"agent": name, "results": catalog.tools_of(name)}
        return Response(ToolListSerializer(data).data)


class ExtendView(_DecisionView):
    """``POST /agent/tool-call/extend``: a later deadline for a pending request."""

    @extend_schema(request=ExtendSerializer, responses=DecisionResultSerializer)
    def post(self, request: Request) -> Response:
        body = _body(ExtendSerializer, request)
        ttl = timedelta(seconds=body["ttl"]) if "ttl" in body else None
        outcome = amendments.extend(
            body["tool_call_id"],
            actor=request_actor(request),
            ttl=ttl,
            expires_at=body.get("expires_at"),
            via=body["via"],
        )
        return _decided(outcome)


class MarkDoneView(_DecisionView):
    """``POST /agent/tool-call/mark-done``: an in-doubt call did happen; ``result`` is recorded."""

    @extend_schema(request=MarkDoneSerializer, responses=DecisionResultSerializer)
    def post(self, request: Request) -> Response:
        body = _body(MarkDoneSerializer, request)
        outcome = services.mark_done(
            body["tool_call_id"],
            actor=request_actor(request),
            result=body.get("result"),
            via=body["via"],
        )
        return _decided(outcome)


class MarkNotDoneView(_DecisionView):
    """``POST /agent/tool-call/mark-not-done``: an in-doubt call did not happen; it runs again."""

    @extend_schema(request=MarkNotDoneSerializer, responses=DecisionResultSerializer)
    def post(self, request: Request) -> Response:
        body = _body(MarkNotDoneSerializer, request)
        outcome = services.mark_not_done(
            body["tool_call_id"], actor=request_actor(request), via=body["via"]
        )
        return _decided(outcome)


class PendingApprovalsView(AirlockAPIView):
    """``GET /agent/approvals/pending``: every call the actor may decide, oldest first."""

    @extend_schema(
        parameters=[
            OpenApiParameter("tool", str),
            OpenApiParameter("agent", str),
            OpenApiParameter("approver", str, description="a role name, or 'requester'"),
            OpenApiParameter("thread", str),
            OpenApiParameter("requester", str, description="an actor ref, e.g. user:7"),
            OpenApiParameter("q", str, description="search tool, summary and arguments"),
            OpenApiParameter("cursor", str),
            OpenApiParameter(
                "limit",
                {"type": "integer", "minimum": 1, "maximum": PendingPagination.max_page_size},
                description=f"1 to {PendingPagination.max_page_size}, default 50",
            ),
            OpenApiParameter("sort", str, enum=list(PendingPagination.orderings)),
        ],
        responses=PendingPageSerializer,
    )
    def get(self, request: Request) -> Response:
        params = request.query_params
        actor = request_actor(request)
        filtered = PendingFilter(params, queryset=selectors.all_calls())
        if not filtered.is_valid():
            raise serializers.ValidationError(filtered.errors)
        pagination = PendingPagination()
        # The first page unfiltered, by the default rule: one named statement (None otherwise).
        page = None if filtered.narrows() else selectors.first_page(actor, params, pagination)
        if page is None:
            branches = selectors.pending_branches(actor)
            page = pending.page(filtered.qs, params, pagination, branches=branches)
        return Response(pagination.envelope(request, page, pending_results(page.rows)))


class RememberedListView(AirlockAPIView):
    """``GET /agent/remembered``: the actor's remembered approvals (``?all=1``: revoked too)."""

    @extend_schema(responses=RememberedApprovalSerializer(many=True))
    def get(self, request: Request) -> Response:
        include_inactive = request.query_params.get("all") in ("1", "true")
        grants = selectors.remembered_for(request_actor(request), include_inactive=include_inactive)
        return Response(RememberedApprovalSerializer(grants[:500], many=True).data)


class RememberedDetailView(AirlockAPIView):
    """``GET`` / ``DELETE /agent/remembered/<id>``: one grant; delete revokes it (idempotent)."""

    def _grant(self, request: Request, pk: str) -> RememberedApproval:
        # Any id shape reaches this view, so a malformed one is a JSON 404 like an unknown one.
        if not pk.isascii() or not pk.isdigit():
            raise Http404
        grant = (
            selectors.remembered_for(request_actor(request), include_inactive=True)
            .filter(pk=pk)
            .first()
        )
        if grant is None:
            raise Http404
        return grant

    @extend_schema(responses=RememberedApprovalSerializer)
    def get(self, request: Request, pk: str) -> Response:
        return Response(RememberedApprovalSerializer(self._grant(request, pk)).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, pk: str) -> Response:
        self._grant(request, pk)  # 404 for grants the actor may not see
        amendments.revoke(int(pk), actor=request_actor(request), via="api")
        return Response(status=204)
