"""A project that includes the chat API (with its catch-all) before the approvals API."""

from __future__ import annotations

from django.urls import include, path

urlpatterns = [
    path("agent/", include("agent_core.api.urls")),
    path("agent/", include("approvals.api.urls")),
]
