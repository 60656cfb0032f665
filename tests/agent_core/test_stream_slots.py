"""Issue #35: one actor held 300 SSE streams; now ``AGENT["MAX_STREAMS_PER_ACTOR"]`` (per
process) caps the streams one actor follows at once: 429 ``too_many_streams`` past it, a
WebSocket closed with 4429, and a stream that ends frees its slot."""

from __future__ import annotations

import gc
import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.test import AsyncClient, Client

from agent_core.actors import actor_for_user
from agent_core.streams import stream_slots
from config.asgi import application
from tests.asgi_stream import session_cookie
from tests.conftest import REFUND
from tests.factories import make_user

# The streams read on live's reader threads, with their own connections: the run is committed.
pytestmark = pytest.mark.django_db(transaction=True)


def test_an_actor_past_its_stream_cap_is_429_until_a_stream_ends(turn, settings):
    settings.AGENT = {**settings.AGENT, "MAX_STREAMS_PER_ACTOR": 2}
    alice = make_user("alice")
    actor = actor_for_user(alice)
    run = turn(REFUND, actor=actor)  # waits on alice: its stream stays open
    client = Client()
    client.force_login(alice)
    url = f"/agent/chat/{run.pk}/stream"

    async def scenario() -> dict[str, Any]:
        browser = AsyncClient()
        browser.cookies = client.cookies
        held = []
        for _ in range(2):
            response = await browser.get(url)
            events: Any = aiter(response.streaming_content)  # type: ignore[attr-defined]
            assert (await anext(events)).startswith(b"event: meta\n")
            held.append((response, events))
        said: dict[str, Any] = {"held": stream_slots.held(actor)}
        refused = await browser.get(url)
        said["refused"] = (refused.status_code, json.loads(refused.content), refused["Retry-After"])
        headers = [(b"origin", b"http://localhost"), (b"cookie", session_cookie(client).encode())]
        socket = WebsocketCommunicator(application.router, f"/agent/chat/{run.pk}/ws", headers)
        assert (await socket.connect(timeout=10))[0]
        said["socket"] = await socket.receive_output(timeout=10)
        response, events = held.pop()
        await events.aclose()
        del response, events
        gc.collect()  # the ended stream's run object goes, and its slot with it
        said["after_one_ended"] = stream_slots.held(actor)
        again = await browser.get(url)
        said["again"] = again.status_code
        events = aiter(again.streaming_content)  # type: ignore[attr-defined]
        await anext(events)
        await events.aclose()
        for _, events in held:
            await events.aclose()
        return said

    said = async_to_sync(scenario)()
    assert said["held"] == 2
    status, body, retry = said["refused"]
    assert (status, body["code"]) == (429, "too_many_streams") and int(retry) >= 1
    assert said["socket"] == {"type": "websocket.close", "code": 4429}
    assert said["after_one_ended"] == 1
    assert said["again"] == 200
