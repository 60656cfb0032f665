"""The console under another prefix: its pages' WebSocket URL comes from reverse(), and the
ASGI helper routes the WebSocket by the URLconf, so live updates follow the mount."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.test import override_settings
from django.urls import include, path

from agent_core.asgi import websocket_application
from tests.factories import make_user

pytestmark = pytest.mark.django_db(transaction=True)

urlpatterns = [
    path("ops/", include("console.urls")),
    path("api/", include("agent_core.api.urls")),
]


def _connects(path: str, user: object) -> bool:
    async def go() -> bool:
        communicator = WebsocketCommunicator(websocket_application(), path)
        communicator.scope["user"] = user
        connected, _ = await communicator.connect(timeout=10)
        if connected:
            await communicator.disconnect()
        return connected

    return async_to_sync(go)()


@override_settings(ROOT_URLCONF="tests.console.test_mounting")
def test_the_console_s_websocket_follows_its_mount(client):
    otto = make_user("otto", "operator")
    client.force_login(otto)
    page = client.get("/ops/inbox/").content.decode()
    assert 'data-ws="/ops/ws/"' in page
    assert _connects("/ops/ws/", otto)
    assert not _connects("/console/ws/", otto)  # nothing there any more


@override_settings(ROOT_URLCONF="tests.console.test_mounting")
def test_a_websocket_url_over_plain_http_is_a_426(client):
    response = client.get("/ops/ws/")
    assert response.status_code == 426 and response.json()["code"] == "websocket_only"
