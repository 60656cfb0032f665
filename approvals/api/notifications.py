"""``GET`` / ``PUT /agent/notifications/preferences``: a person's own notification opt-out."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from agent_core.api.actors import request_actor
from agent_core.api.base import AirlockAPIView, extend_schema

from ..models import NotificationOptOut
from .serializers import StrictBooleanField


class PreferencesSerializer(serializers.Serializer[Any]):
    """``{opted_out}``: true stops every notification to you (the inbox still lists your calls)."""

    opted_out = StrictBooleanField()


class NotificationPreferencesView(AirlockAPIView):
    """The acting person's notification preferences."""

    @extend_schema(responses=PreferencesSerializer)
    def get(self, request: Request) -> Response:
        ref = request_actor(request).ref
        opted_out = NotificationOptOut.objects.filter(actor_ref=ref).exists()
        return Response({"opted_out": opted_out})

    @extend_schema(request=PreferencesSerializer, responses=PreferencesSerializer)
    def put(self, request: Request) -> Response:
        body = PreferencesSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        ref = request_actor(request).ref
        if body.validated_data["opted_out"]:
            NotificationOptOut.objects.get_or_create(actor_ref=ref)
        else:
            NotificationOptOut.objects.filter(actor_ref=ref).delete()
        return Response({"opted_out": body.validated_data["opted_out"]})
