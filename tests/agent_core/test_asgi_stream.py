"""The SSE stream under the project's ASGI application: Django's own ASGI handler streams the
view's ``EventStream`` (an async iterator), sends keep-alives while the run waits, and ends the
stream when the client leaves: its live feed stops and its actor's slot is freed."""

from __future__ import annotations

import gc

import pytest
from asgiref.sync import async_to_sync
from asgiref.testing import ApplicationCommunicator
from django.test import Client

from agent_core.actors import actor_for_user
from agent_core.streams import fanout, stream_slots
from config.asgi import application
from tests.asgi_stream import asgi_stream, readers_idle, session_cookie
from tests.conftest import REFUND
from tests.factories import make_user

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_stream_whose_client_leaves_ends_and_frees_its_slot(turn):
    owner = make_user("alice")
    actor = actor_for_user(owner)
    run = turn(REFUND, actor=actor)  # waits on alice: the stream would stay open
    client = Client()
    client.force_login(owner)
    status, headers, body = async_to_sync(asgi_stream)(client, f"/agent/chat/{run.pk}/stream")
    assert status == 200 and headers["Content-Type"] == "text/event-stream"
    assert body.startswith(b"event: meta\n")
    gc.collect()
    assert stream_slots.held(actor) == 0  # asgi_stream saw the feed stop (fanout.followed)


def test_a_waiting_stream_sends_keep_alives(turn, settings):
    settings.AGENT = {**settings.AGENT, "STREAM_KEEPALIVE_SECONDS": 0.2}
    owner = make_user("alice")
    run = turn(REFUND, actor=actor_for_user(owner))
    client = Client()
    client.force_login(owner)
    scope = {
        **{"type": "http", "http_version": "1.1", "method": "GET", "scheme": "http"},
        **{"path": f"/agent/chat/{run.pk}/stream", "root_path": "", "query_string": b""},
        "server": ("testserver", 80),
        "headers": [(b"host", b"testserver"), (b"cookie", session_cookie(client).encode())],
    }

    async def read_until_keep_alive() -> bytes:
        communicator = ApplicationCommunicator(application.router, scope)
        await communicator.send_input({"type": "http.request", "body": b""})
        assert (await communicator.receive_output(10))["status"] == 200
        body = b""
        while b": keep-alive\n" not in body:
            body += (await communicator.receive_output(10))["body"]
        await communicator.send_input({"type": "http.disconnect"})
        await communicator.wait(10)
        assert fanout.followed() == {}
        return body

    body = async_to_sync(read_until_keep_alive)()
    readers_idle()
    assert body.startswith(b"event: meta\n") and b'"approval-requested"' in body
