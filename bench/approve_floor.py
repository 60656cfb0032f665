"""The approve benchmark's no-op floor: ``/bench/noop`` (settings ``bench.approve_settings``,
this URLconf), an Airlock API view with the endpoint's middleware, authentication, actor and JSON
parsing, deciding nothing: the request path without the decision."""

from __future__ import annotations

from django.urls import path
from rest_framework.request import Request
from rest_framework.response import Response

from agent_core.api.actors import request_actor
from agent_core.api.base import AirlockAPIView
from config.urls import urlpatterns as project_urls


class NoopView(AirlockAPIView):
    """Authenticate, resolve the actor and parse the body as the endpoint does; decide nothing."""

    def post(self, request: Request) -> Response:
        actor = request_actor(request)
        body = request.data
        assert isinstance(body, dict)
        return Response({"tool_call_id": body["tool_call_id"], "by": actor.ref})


urlpatterns = [path("bench/noop", NoopView.as_view()), *project_urls]
