"""URLs of the demo / development project."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="console:inbox", permanent=False)),
    path("admin/", admin.site.urls),
    path("agent/", include("approvals.api.urls")),
    path("agent/", include("agent_core.api.urls")),  # last: its catch-all answers JSON 404s
    path("console/", include("console.urls")),
]
