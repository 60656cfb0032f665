"""The one small streaming protocol every model provider implements."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias

from ..tools import AbortSignal


@dataclass(frozen=True)
class ToolDefinition:
    """A tool as offered to a model: name, description and the JSON schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class ModelMessage:
    """One transcript entry in the provider-neutral shape of ``Message.content`` parts.

    Parts: ``{"type": "text", "text"}``, ``{"type": "tool_call", "id", "name", "args"}`` and
    ``{"type": "tool_result", "tool_call_id", "tool_name", "output", "is_error"}``.
    """

    role: str
    parts: list[dict[str, Any]]


@dataclass(frozen=True)
class ModelRequest:
    """Everything a provider needs for one model step."""

    model: str
    instructions: str
    messages: list[ModelMessage]
    tools: list[ToolDefinition]


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ToolCallPart:
    """A complete tool call; ``args`` is a dict, or the raw string when it is not valid JSON."""

    provider_call_id: str
    name: str
    args: dict[str, Any] | str


@dataclass(frozen=True)
class Usage:
    """Tokens as the provider reports them; ``cached_tokens``: input read from its prompt cache
    (part of ``input_tokens`` for OpenAI, in addition to them for Anthropic), where reported."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_tokens": self.cached_tokens,
        }


@dataclass(frozen=True)
class Finish:
    reason: str


ModelEvent: TypeAlias = TextDelta | ToolCallPart | Usage | Finish


@dataclass
class ModelResponse:
    """A finished model step, folded from its events."""

    text: str = ""
    tool_calls: list[ToolCallPart] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"

    def add(self, event: ModelEvent) -> None:
        match event:
            case TextDelta(text=text):
                self.text += text
            case ToolCallPart():
                self.tool_calls.append(event)
            case Usage():
                self.usage = Usage(
                    self.usage.input_tokens + event.input_tokens,
                    self.usage.output_tokens + event.output_tokens,
                    self.usage.cached_tokens + event.cached_tokens,
                )
            case Finish(reason=reason):
                self.finish_reason = reason


class ModelProvider(Protocol):
    """Streams one model step; raises ``ModelError`` (``retryable`` set) when the vendor fails."""

    def stream(self, request: ModelRequest, *, abort: AbortSignal) -> Iterator[ModelEvent]: ...
