"""A stream served leanly by ``with_airlock`` (``agent_core.streaming``): its path is resolved
once per attach, by the router that finds the view lean; the handler reuses that match."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.test import Client
from django.urls import get_resolver
from django.urls.resolvers import URLResolver

from agent_core.actors import actor_for_user
from tests.factories import make_user
from tests.lean import lean_stream

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


def test_a_stream_attaching_resolves_its_path_once(turn, resolves):
    owner = make_user("alice")
    run = turn("hello", actor=actor_for_user(owner))
    client = Client()
    client.force_login(owner)
    path = f"/agent/chat/{run.pk}/stream"
    status, _, body = async_to_sync(lean_stream)(client, path)
    assert status == 200 and body.startswith(b"event: meta\n")
    assert resolves == [path]


def test_a_refused_stream_resolves_its_path_once(resolves):
    path = "/agent/chat/run_unknown/stream"
    status, _, body = async_to_sync(lean_stream)(Client(), path)
    assert status == 401, body
    assert resolves == [path]
