"""One model request and its streamed events, and what a recorded step keeps of its usage, the
same for every vendor's provider tests."""

from __future__ import annotations

from agent_core.models import Run, Step, StreamFrame
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


def assert_usage_recorded(run: Run, step: Step, usage: dict[str, int]) -> None:
    """The provider's own figures, unchanged, in the journal, the ``step-finish`` frame and the
    run's totals."""
    assert step.output["usage"] == usage
    assert {name: getattr(step, name) for name in usage} == usage
    [finish] = StreamFrame.objects.filter(run=run, kind="step-finish")
    assert finish.data["usage"] == usage
    run.refresh_from_db()
    assert {name: getattr(run, name) for name in usage} == usage
