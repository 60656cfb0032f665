"""URLs of the demo / development project: the landing page, the admin and the three apps."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from django.views.generic import TemplateView

urlpatterns = [
    path("", TemplateView.as_view(template_name="home.html"), name="home"),
    path("admin/", admin.site.urls),
    path("agent/", include("agent_core.api.urls")),
    path("agent/", include("approvals.api.urls")),
    path("console/", include("console.urls")),
]
