"""A fake model server per test, and settings that point a provider at it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.providers.fake_server import FakeModelServer


@pytest.fixture
def fake() -> Iterator[FakeModelServer]:
    server = FakeModelServer().start()
    yield server
    server.stop()


@pytest.fixture
def use_openai(settings: Any, fake: FakeModelServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo agent talks to the fake server through the OpenAI provider."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    settings.AGENT = {
        **settings.AGENT,
        "MODEL": "openai:test-model",
        "OPENAI": {"BASE_URL": f"{fake.url}/v1", "API_KEY": "sk-test", "TIMEOUT": 10},
    }


@pytest.fixture
def use_anthropic(settings: Any, fake: FakeModelServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo agent talks to the fake server through the Anthropic provider."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    settings.AGENT = {
        **settings.AGENT,
        "MODEL": "anthropic:test-model",
        "ANTHROPIC": {"BASE_URL": fake.url, "API_KEY": "sk-ant-test", "TIMEOUT": 10},
    }
