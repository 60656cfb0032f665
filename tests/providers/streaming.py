"""One model request and its streamed events, the same for every vendor's provider tests."""

from __future__ import annotations

from agent_core.providers import get_provider
from agent_core.providers.base import ModelMessage, ModelRequest, ToolDefinition
from agent_core.tools import AbortSignal

LOOKUP = ToolDefinition("lookup_order", "Look up an order.", {"type": "object", "properties": {}})


def model_request(model: str, text: str = "hi") -> ModelRequest:
    """A one-message request to ``model`` offering the ``lookup_order`` tool."""
    return ModelRequest(
        model=model,
        instructions="Be brief.",
        messages=[ModelMessage("user", [{"type": "text", "text": text}])],
        tools=[LOOKUP],
    )


def stream_events(
    model: str, req: ModelRequest | None = None, abort: AbortSignal | None = None
) -> list[object]:
    """Every event the provider of ``model`` streams for ``req`` (default: ``model_request``)."""
    provider = get_provider(model)
    return list(provider.stream(req or model_request(model), abort=abort or AbortSignal()))
