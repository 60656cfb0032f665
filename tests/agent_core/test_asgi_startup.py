"""What the ASGI application does at the server's first event (lifespan start-up), and a web
worker under gunicorn once it has loaded the application: the work that would otherwise fall on
the first streams to attach or the first requests."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest
from channels.layers import channel_layers
from django.conf import settings
from django.urls import clear_url_caches, get_resolver

from agent_core import asgi, gunicorn, startup
from agent_core.asgi import AirlockApplication


async def _start_up(app: AirlockApplication) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []
    events = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])

    async def receive() -> dict[str, Any]:
        return next(events)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app({"type": "lifespan"}, receive, send)
    return sent


@pytest.fixture
def unfrozen() -> Any:
    yield
    gc.unfreeze()


def test_start_up_makes_the_channel_layer_and_freezes_what_it_loaded(unfrozen, monkeypatch):
    monkeypatch.setattr(channel_layers, "backends", {})
    monkeypatch.setattr(asgi, "start_background", lambda: None)  # no sweeper thread left behind
    gc.unfreeze()
    app = AirlockApplication(lambda *args: None)
    assert asyncio.run(_start_up(app)) == [
        {"type": "lifespan.startup.complete"},
        {"type": "lifespan.shutdown.complete"},
    ]
    assert set(channel_layers.backends) == {"default"} and settings.CHANNEL_LAYERS
    # Frozen: the start-up heap is left out of every later collection.
    assert gc.get_freeze_count() > 10_000


def test_a_web_worker_loads_its_views_and_freezes_what_start_up_loaded(unfrozen):
    gc.unfreeze()
    clear_url_caches()  # as a worker that has served nothing yet
    gunicorn.post_worker_init(worker=None)
    assert "url_patterns" in vars(get_resolver())  # the URLconf, and every view, imported
    assert gc.get_freeze_count() > 10_000


def test_settle_does_each_warm_up_in_order_then_freezes_what_it_left(unfrozen):
    gc.unfreeze()
    done: list[str] = []
    startup.settle(lambda: done.append("first"), lambda: done.append("second"))
    assert done == ["first", "second"]
    assert gc.get_freeze_count() > 10_000
