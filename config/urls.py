"""URLs of the demo / development project."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("agent/", include("agent_core.api.urls")),
    path("agent/", include("approvals.api.urls")),
    path("console/", include("console.urls")),
]
