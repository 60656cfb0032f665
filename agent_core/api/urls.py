"""``path("agent/", include("agent_core.api.urls"))``: the chat API, its stream and its schema.

Its last pattern answers every other path under the prefix with a JSON 404, so include it after
any other app's API under the same prefix (``approvals.api.urls``; system check
``approvals.E003``).
"""

from __future__ import annotations

from django.urls import path, re_path
from rest_framework.routers import SimpleRouter

from ..asgi import websocket_view
from ..streams import aisdk, sse
from ..streams.consumers import RunStreamConsumer
from . import views
from .errors import not_found
from .schema import DocsView, SchemaView

app_name = "agent_core_api"

router = SimpleRouter(trailing_slash=False)
router.register("threads", views.ThreadViewSet, basename="thread")
router.register("runs", views.RunViewSet, basename="run")

urlpatterns = [
    path("chat", views.ChatView.as_view(), name="chat"),
    path("chat/<airlock_id:run_id>/stream", sse.stream_view, name="chat-stream"),
    path("chat/<airlock_id:run_id>/ui-stream", aisdk.ui_stream_view, name="chat-ui-stream"),
    path("chat/<airlock_id:run_id>/ws", websocket_view(RunStreamConsumer), name="chat-ws"),
    path("chat/<airlock_id:run_id>/cancel", views.CancelView.as_view(), name="chat-cancel"),
    path("schema/", SchemaView.as_view(), name="schema"),
    path("docs/", DocsView.as_view(url_name="agent_core_api:schema"), name="docs"),
    *router.urls,
    re_path(r"", not_found, name="not-found"),  # last: anything else under the prefix
]
