"""``path("agent/", include("agent_core.api.urls"))``: the chat API, its stream and its schema."""

from __future__ import annotations

from django.urls import path
from rest_framework.routers import SimpleRouter

from .. import sse
from ..asgi import websocket_view
from ..consumers import RunStreamConsumer
from . import views
from .schema import DocsView, SchemaView

app_name = "agent_core_api"

router = SimpleRouter(trailing_slash=False)
router.register("threads", views.ThreadViewSet, basename="thread")
router.register("runs", views.RunViewSet, basename="run")

urlpatterns = [
    path("chat", views.ChatView.as_view(), name="chat"),
    path("chat/<str:run_id>/stream", sse.stream_view, name="chat-stream"),
    path("chat/<str:run_id>/ws", websocket_view(RunStreamConsumer), name="chat-ws"),
    path("chat/<str:run_id>/cancel", views.CancelView.as_view(), name="chat-cancel"),
    path("schema/", SchemaView.as_view(), name="schema"),
    path("docs/", DocsView.as_view(url_name="agent_core_api:schema"), name="docs"),
    *router.urls,
]
