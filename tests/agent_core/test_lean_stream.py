"""A stream served leanly by ``with_airlock`` (``agent_core.streaming``): its path is resolved
once per attach, by the router that finds the view lean; the handler reuses that match."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from asgiref.testing import ApplicationCommunicator
from django.test import Client
from django.urls import get_resolver
from django.urls.resolvers import URLResolver

from agent_core import fanout
from agent_core.actors import actor_for_user
from config.asgi import application
from tests.factories import make_user

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def resolves(monkeypatch) -> list[str]:
    """The paths the project's URLconf resolved (its root resolver; included ones not counted)."""
    seen: list[str] = []
    resolve = URLResolver.resolve

    def counting(self: URLResolver, path: Any) -> Any:
        if self is get_resolver():
            seen.append(str(path))
        return resolve(self, path)

    monkeypatch.setattr(URLResolver, "resolve", counting)
    return seen


async def _attach(path: str, cookie: str) -> tuple[int, bytes]:
    scope = {
        **{"type": "http", "http_version": "1.1", "method": "GET", "scheme": "http"},
        **{"path": path, "root_path": "", "query_string": b"", "server": ("testserver", 80)},
        "headers": [(b"host", b"testserver"), (b"cookie", cookie.encode())],
    }
    communicator = ApplicationCommunicator(application.router, scope)
    await communicator.send_input({"type": "http.request", "body": b""})
    start = await communicator.receive_output(10)
    body = await communicator.receive_output(10)
    await communicator.send_input({"type": "http.disconnect"})
    await communicator.wait(10)
    assert fanout.followed() == {}
    return start["status"], body["body"]


def test_a_stream_attaching_resolves_its_path_once(turn, resolves):
    owner = make_user("alice")
    run = turn("hello", actor=actor_for_user(owner))
    client = Client()
    client.force_login(owner)
    cookie = client.cookies.output(attrs=[], header="", sep=";").strip()
    path = f"/agent/chat/{run.pk}/stream"
    status, body = async_to_sync(_attach)(path, cookie)
    assert status == 200 and body.startswith(b"event: meta\n")
    assert resolves == [path]


def test_a_refused_stream_resolves_its_path_once(resolves):
    path = "/agent/chat/run_unknown/stream"
    status, body = async_to_sync(_attach)(path, "")
    assert status == 401, body
    assert resolves == [path]
