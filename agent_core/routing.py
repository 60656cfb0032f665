"""WebSocket routes of the agent core, for ``config/asgi.py``'s ``ProtocolTypeRouter``."""

from __future__ import annotations

from django.urls import path

from .consumers import RunStreamConsumer

websocket_urlpatterns = [
    path("agent/chat/<airlock_id:run_id>/ws", RunStreamConsumer.as_asgi()),
]
