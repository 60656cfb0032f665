"""WebSocket routes of the console (combined with the other apps' in ``config/asgi.py``)."""

from __future__ import annotations

from django.urls import path

from .consumers import ConsoleConsumer

websocket_urlpatterns = [
    path("console/ws/", ConsoleConsumer.as_asgi()),
    path("console/ws/runs/<airlock_id:run_id>/", ConsoleConsumer.as_asgi()),
]
