"""The vendors' SDKs are extras (django-airlock[openai], [anthropic]): a project without one can
use the others, and a model of that vendor fails with what to install."""

from __future__ import annotations

import sys

import pytest

from agent_core.checks import check_agent_settings
from agent_core.exceptions import ModelError
from tests.providers.streaming import stream_events


@pytest.mark.parametrize(("vendor", "model"), [("openai", "gpt-x"), ("anthropic", "claude-x")])
def test_a_missing_sdk_is_a_clear_error_naming_the_extra(monkeypatch, settings, vendor, model):
    settings.AGENT = {**settings.AGENT, vendor.upper(): {"BASE_URL": "http://127.0.0.1:9"}}
    monkeypatch.setitem(sys.modules, vendor, None)  # `import openai` now raises ImportError
    with pytest.raises(ModelError, match=rf"pip install 'django-airlock\[{vendor}\]'") as caught:
        stream_events(f"{vendor}:{model}")
    assert caught.value.retryable is False
    assert check_agent_settings() == []  # the provider modules import without their SDK
