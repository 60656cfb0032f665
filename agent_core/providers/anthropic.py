"""Anthropic messages (the official ``anthropic`` SDK), streamed with tool use.

``AGENT["ANTHROPIC"]["BASE_URL"]`` / ``ANTHROPIC_BASE_URL`` point it at a proxy or gateway. The SDK
does not retry (``max_retries=0``): the loop owns retries, and journals each attempt.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..conf import agent_settings
from ..exceptions import ModelError
from ..tools import AbortSignal
from . import http
from .base import Finish, ModelEvent, ModelMessage, ModelRequest, TextDelta, ToolCallPart, Usage

# Anthropic's stop reasons in the words the loop uses (the rest pass through).
if TYPE_CHECKING:
    import anthropic

_FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}


class AnthropicProvider:
    """Streams one Messages API response as model events."""

    def __init__(self, name: str) -> None:
        self.name = name

    def client(self) -> anthropic.Anthropic:
        vendor = agent_settings().ANTHROPIC
        base_url, api_key = http.connection(vendor, env_prefix="ANTHROPIC")
        sdk = http.import_sdk("anthropic")
        return sdk.Anthropic(
            base_url=base_url, api_key=api_key, timeout=vendor.TIMEOUT, max_retries=0
        )

    def stream(self, request: ModelRequest, *, abort: AbortSignal) -> Iterator[ModelEvent]:
        client = self.client()
        try:
            stream = client.messages.create(**self.body(request))
        except http.import_sdk("anthropic").AnthropicError as exc:
            raise _classify(exc) from exc
        blocks: dict[int, _ToolUse] = {}
        finish = "stop"
        with stream, http.AbortWatcher(abort, stream.response) as watcher:
            try:
                for event in stream:
                    watcher.check()
                    match event.type:
                        case "message_start":
                            usage = event.message.usage
                            yield Usage(input_tokens=usage.input_tokens or 0)
                        case "content_block_start" if event.content_block.type == "tool_use":
                            block = event.content_block
                            blocks[event.index] = _ToolUse(block.id, block.name)
                        case "content_block_delta" if event.delta.type == "text_delta":
                            yield TextDelta(event.delta.text)
                        case "content_block_delta" if event.delta.type == "input_json_delta":
                            blocks[event.index].json.append(event.delta.partial_json)
                        case "message_delta":
                            if event.delta.stop_reason:
                                reason = event.delta.stop_reason
                                finish = _FINISH.get(reason, reason)
                            yield Usage(output_tokens=event.usage.output_tokens or 0)
                # A hang-up by the abort watcher looks like the end of the stream.
                watcher.check()
            except ModelError:
                raise
            except json.JSONDecodeError as exc:
                watcher.check()
                raise http.malformed(exc, "Anthropic") from exc
            except Exception as exc:
                watcher.check()  # a read ended by the abort watcher closing the response
                if isinstance(exc, http.import_sdk("anthropic").AnthropicError):
                    raise _classify(exc) from exc
                raise
        for index in sorted(blocks):
            yield blocks[index].part()
        yield Finish(finish)

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The Messages API request body for ``request``."""
        body: dict[str, Any] = {
            "model": self.name,
            "max_tokens": agent_settings().ANTHROPIC.MAX_TOKENS,
            "messages": _messages(request.messages),
            "stream": True,
        }
        if request.instructions:
            body["system"] = request.instructions
        if request.tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in request.tools
            ]
        return body


@dataclass
class _ToolUse:
    """A tool_use block as it streams: id and name up front, the input as JSON fragments."""

    id: str
    name: str
    json: list[str] = field(default_factory=list)

    def part(self) -> ToolCallPart:
        return ToolCallPart(
            provider_call_id=self.id, name=self.name, args=http.parse_args("".join(self.json))
        )


def _messages(messages: list[ModelMessage]) -> list[dict[str, Any]]:
    """Our transcript as Anthropic messages: tool results are user turns, and turns alternate."""
    out: list[dict[str, Any]] = []
    for message in messages:
        role = "assistant" if message.role == "assistant" else "user"
        blocks = [b for p in message.parts if (b := _block(p)) is not None]
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)  # e.g. tool results followed by the user's reply
        else:
            out.append({"role": role, "content": blocks})
    return out


def _block(part: dict[str, Any]) -> dict[str, Any] | None:
    match part["type"]:
        case "text":
            # The API refuses empty text blocks.
            return {"type": "text", "text": part["text"]} if part["text"] else None
        case "tool_call":
            return {
                "type": "tool_use",
                "id": part["id"],
                "name": part["name"],
                "input": part["args"],
            }
        case "tool_result":
            return {
                "type": "tool_result",
                "tool_use_id": part["tool_call_id"],
                "content": http.as_text(part["output"]),
                "is_error": bool(part.get("is_error")),
            }
    return None


def _classify(exc: anthropic.AnthropicError) -> ModelError:
    """Timeouts, connection errors, 429, 529 and 5xx are retryable; 400, 401, 403, 404 are not."""
    sdk = http.import_sdk("anthropic")
    match exc:
        case sdk.APIStatusError(status_code=status) if status < 400:
            # An error event inside an accepted (200) stream, e.g. overloaded_error.
            return ModelError(f"Anthropic failed mid-stream: {exc.message}", retryable=True)
        case sdk.APIStatusError(status_code=status):
            return ModelError(
                f"Anthropic answered {status}: {exc.message}",
                retryable=http.status_is_retryable(status),
            )
        case sdk.APIConnectionError():
            return ModelError(f"Anthropic unreachable: {exc}", retryable=True)
        case sdk.APIError():
            # An error event inside an accepted stream (e.g. overloaded): worth another attempt.
            return ModelError(f"Anthropic failed mid-stream: {exc}", retryable=True)
        case _:
            return ModelError(f"Anthropic client error: {exc}")
