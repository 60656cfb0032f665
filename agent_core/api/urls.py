"""``path("agent/", include("agent_core.api.urls"))``: the chat API, its stream and its schema."""

from __future__ import annotations

from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.routers import SimpleRouter

from .. import aisdk, sse
from . import views

app_name = "agent_core_api"

router = SimpleRouter(trailing_slash=False)
router.register("threads", views.ThreadViewSet, basename="thread")
router.register("runs", views.RunViewSet, basename="run")

urlpatterns = [
    path("chat", views.ChatView.as_view(), name="chat"),
    path("chat/<str:run_id>/stream", sse.stream_view, name="chat-stream"),
    path("chat/<str:run_id>/ui-stream", aisdk.ui_stream_view, name="chat-ui-stream"),
    path("chat/<str:run_id>/cancel", views.CancelView.as_view(), name="chat-cancel"),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="agent_core_api:schema"), name="docs"),
    *router.urls,
]
