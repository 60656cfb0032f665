"""The console's URLs, mounted under ``/console/`` (namespace ``console``)."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path
from django.views.generic import RedirectView

from agent_core.asgi import websocket_view

from .consumers import ConsoleConsumer
from .views import (
    audit,
    bulk,
    deliveries,
    doubt,
    evidence,
    inbox,
    inbox_list,
    metrics,
    mine,
    nudge,
    remembered,
    runs,
)

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
    path("inbox/", inbox_list.inbox, name="inbox"),
    path("inbox/fragment/", inbox_list.inbox_fragment, name="inbox_fragment"),
    path("mine/", mine.mine, name="mine"),
    path("mine/fragment/", mine.mine_fragment, name="mine_fragment"),
    path("inbox/bulk/", bulk.bulk, name="bulk"),
    path("calls/<airlock_id:call_id>/", inbox_list.call_card, name="call"),
    path("calls/<airlock_id:call_id>/row/", inbox_list.call_row, name="call_row"),
    path("calls/<airlock_id:call_id>/state/", inbox.call_state, name="call_state"),
    path("calls/<airlock_id:call_id>/evidence/", evidence.call_evidence, name="evidence"),
    path("calls/<airlock_id:call_id>/approve/", inbox.approve, name="approve"),
    path("calls/<airlock_id:call_id>/remember/", inbox.remember, name="remember"),
    path("calls/<airlock_id:call_id>/reject/", inbox.reject, name="reject"),
    path("calls/<airlock_id:call_id>/edit/", inbox.edit, name="edit"),
    path("calls/<airlock_id:call_id>/answer/", inbox.answer, name="answer"),
    path("calls/<airlock_id:call_id>/extend/", inbox.extend, name="extend"),
    path("calls/<airlock_id:call_id>/nudge/", nudge.nudge, name="nudge"),
    path("calls/<airlock_id:call_id>/escalate/", nudge.escalate, name="escalate"),
    path("in-doubt/", doubt.in_doubt_list, name="in_doubt"),
    path("in-doubt/fragment/", doubt.in_doubt_fragment, name="in_doubt_fragment"),
    path("calls/<airlock_id:call_id>/mark-done/", doubt.mark_done, name="mark_done"),
    path("calls/<airlock_id:call_id>/mark-not-done/", doubt.mark_not_done, name="mark_not_done"),
    path("remembered/", remembered.remembered, name="remembered"),
    path("remembered/<int:grant_id>/revoke/", remembered.revoke, name="revoke"),
    path("runs/", runs.runs, name="runs"),
    path("runs/<airlock_id:run_id>/", runs.run, name="run"),
    path("runs/<airlock_id:run_id>/fragment/", runs.run_fragment, name="run_fragment"),
    path("runs/<airlock_id:run_id>/cancel/", runs.cancel, name="cancel_run"),
    path("runs/<airlock_id:run_id>/fork/", runs.fork, name="fork_run"),
    path("audit/", audit.audit, name="audit"),
    path("audit.csv", audit.audit_csv, name="audit_csv"),
    path("metrics/", metrics.metrics_page, name="metrics"),
    path("deliveries/", deliveries.deliveries, name="deliveries"),
    # Live updates (WebSocket only; with_airlock in the project's asgi.py routes them).
    path("ws/", websocket_view(ConsoleConsumer), name="ws"),
    path("ws/runs/<airlock_id:run_id>/", websocket_view(ConsoleConsumer), name="ws_run"),
]
