"""Model providers behind one protocol; ``get_provider("vendor:model")`` picks one."""

from __future__ import annotations

from django.utils.module_loading import import_string

from ..conf import agent_settings
from ..exceptions import ModelError
from .base import ModelProvider


def get_provider(model: str) -> ModelProvider:
    """The provider for a model string such as ``scripted:demo`` or ``openai:gpt-4o-mini``."""
    vendor, _, name = model.partition(":")
    try:
        path = agent_settings().PROVIDERS[vendor]
    except KeyError:
        raise ModelError(f"no provider is configured for {vendor!r} (model {model!r})") from None
    provider: ModelProvider = import_string(path)(name)
    return provider
