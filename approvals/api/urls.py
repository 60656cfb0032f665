"""Mounted under ``agent/`` by the project: ``path("agent/", include("approvals.api.urls"))``."""

from __future__ import annotations

from typing import Any

from django.urls import path

from agent_core.asgi import asgi_view

from . import links, notifications, ui_chat, views

app_name = "approvals_api"


async def mcp_endpoint(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """``/agent/mcp`` (``approvals.mcp_http``), imported at its first request: the MCP SDK takes
    a second to import, which a process that never serves it does not pay."""
    from ..mcp_http import endpoint

    await endpoint(scope, receive, send)


urlpatterns = [
    path("tool-call/approve", views.ApproveView.as_view(), name="approve"),
    path("tool-call/reject", views.RejectView.as_view(), name="reject"),
    path("tool-call/answer", views.AnswerView.as_view(), name="answer"),
    path("tool-call/skip", views.SkipView.as_view(), name="skip"),
    path("tools", views.ToolsView.as_view(), name="tools"),
    path("tool-call/extend", views.ExtendView.as_view(), name="extend"),
    path("tool-call/mark-done", views.MarkDoneView.as_view(), name="mark-done"),
    path("tool-call/mark-not-done", views.MarkNotDoneView.as_view(), name="mark-not-done"),
    path("approvals/pending", views.PendingApprovalsView.as_view(), name="pending"),
    path("remembered", views.RememberedListView.as_view(), name="remembered"),
    path("remembered/<str:pk>", views.RememberedDetailView.as_view(), name="remembered-detail"),
    path("links/<str:action>/<str:token>", links.link_page, name="link"),
    path("ui-chat", ui_chat.UIChatView.as_view(), name="ui-chat"),
    path("mcp", asgi_view(mcp_endpoint), name="mcp"),
    path("ui-chat/<airlock_id:chat_id>/stream", ui_chat.ui_chat_stream_view, name="ui-chat-stream"),
    path(
        "notifications/preferences",
        notifications.NotificationPreferencesView.as_view(),
        name="notification-preferences",
    ),
]
