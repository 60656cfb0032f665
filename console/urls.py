"""The console's URLs, mounted under ``/console/`` (namespace ``console``)."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path
from django.views.generic import RedirectView

from agent_core.asgi import websocket_view

from .consumers import ConsoleConsumer
from .views import audit, doubt, inbox, metrics, remembered, runs

app_name = "console"

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="console:inbox"), name="home"),
    path(
        "login/",
        auth_views.LoginView.as_view(
            template_name="console/login.html",
            redirect_authenticated_user=True,
            next_page="console:inbox",
        ),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(next_page="console:login"), name="logout"),
    path("inbox/", inbox.inbox, name="inbox"),
    path("inbox/fragment/", inbox.inbox_fragment, name="inbox_fragment"),
    path("calls/<str:call_id>/approve/", inbox.approve, name="approve"),
    path("calls/<str:call_id>/reject/", inbox.reject, name="reject"),
    path("calls/<str:call_id>/edit/", inbox.edit, name="edit"),
    path("calls/<str:call_id>/answer/", inbox.answer, name="answer"),
    path("calls/<str:call_id>/extend/", inbox.extend, name="extend"),
    path("in-doubt/", doubt.in_doubt_list, name="in_doubt"),
    path("calls/<str:call_id>/mark-done/", doubt.mark_done, name="mark_done"),
    path("calls/<str:call_id>/mark-not-done/", doubt.mark_not_done, name="mark_not_done"),
    path("remembered/", remembered.remembered, name="remembered"),
    path("remembered/<int:grant_id>/revoke/", remembered.revoke, name="revoke"),
    path("runs/", runs.runs, name="runs"),
    path("runs/<str:run_id>/", runs.run, name="run"),
    path("runs/<str:run_id>/fragment/", runs.run_fragment, name="run_fragment"),
    path("runs/<str:run_id>/cancel/", runs.cancel, name="cancel_run"),
    path("audit/", audit.audit, name="audit"),
    path("audit.csv", audit.audit_csv, name="audit_csv"),
    path("metrics/", metrics.metrics_page, name="metrics"),
    # Live updates (WebSocket only; with_airlock in the project's asgi.py routes them).
    path("ws/", websocket_view(ConsoleConsumer), name="ws"),
    path("ws/runs/<str:run_id>/", websocket_view(ConsoleConsumer), name="ws_run"),
]
