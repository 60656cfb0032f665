"""OpenAI-compatible chat completions (the official ``openai`` SDK), streamed with tool calls.

Any compatible server works through ``AGENT["OPENAI"]["BASE_URL"]`` (or ``OPENAI_BASE_URL``):
OpenAI itself, vLLM, Ollama, llama.cpp. The SDK does not retry (``max_retries=0``): the loop
owns retries, and journals each attempt.
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

if TYPE_CHECKING:
    import openai


class OpenAIProvider:
    """Streams one chat completion as model events."""

    def __init__(self, name: str) -> None:
        self.name = name

    def client(self) -> openai.OpenAI:
        vendor = agent_settings().OPENAI
        base_url, api_key = http.connection(vendor, env_prefix="OPENAI")
        sdk = http.import_sdk("openai")
        return sdk.OpenAI(base_url=base_url, api_key=api_key, timeout=vendor.TIMEOUT, max_retries=0)

    def stream(self, request: ModelRequest, *, abort: AbortSignal) -> Iterator[ModelEvent]:
        client = self.client()
        try:
            stream = client.chat.completions.create(**self.body(request))
        except http.import_sdk("openai").OpenAIError as exc:
            raise _classify(exc) from exc
        calls: dict[int, _PartialCall] = {}
        finish = "stop"
        with stream, http.AbortWatcher(abort, stream.response) as watcher:
            try:
                for chunk in stream:
                    watcher.check()
                    if chunk.usage is not None:
                        yield Usage(chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
                    for choice in chunk.choices:
                        if choice.delta.content:
                            yield TextDelta(choice.delta.content)
                        for delta in choice.delta.tool_calls or ():
                            calls.setdefault(delta.index, _PartialCall()).add(delta)
                        if choice.finish_reason:
                            finish = choice.finish_reason
                # A hang-up by the abort watcher looks like the end of the stream.
                watcher.check()
            except ModelError:
                raise
            except json.JSONDecodeError as exc:
                watcher.check()
                raise http.malformed(exc, "the OpenAI-compatible server") from exc
            except Exception as exc:
                watcher.check()  # a read ended by the abort watcher closing the response
                if isinstance(exc, http.import_sdk("openai").OpenAIError):
                    raise _classify(exc) from exc
                raise
        for index in sorted(calls):
            yield calls[index].part(index)
        yield Finish(finish)

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The chat completions request body for ``request``."""
        messages: list[dict[str, Any]] = []
        if request.instructions:
            messages.append({"role": "system", "content": request.instructions})
        for message in request.messages:
            messages.extend(_messages(message))
        body: dict[str, Any] = {
            "model": self.name,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_completion_tokens": agent_settings().OPENAI.MAX_TOKENS,
        }
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in request.tools
            ]
        return body


@dataclass
class _PartialCall:
    """A tool call as its pieces arrive: the id and name first, the arguments in fragments."""

    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)

    def add(self, delta: Any) -> None:
        self.id = delta.id or self.id
        if delta.function is not None:
            self.name = delta.function.name or self.name
            if delta.function.arguments:
                self.arguments.append(delta.function.arguments)

    def part(self, index: int) -> ToolCallPart:
        return ToolCallPart(
            provider_call_id=self.id or f"call_{index}",
            name=self.name,
            args=http.parse_args("".join(self.arguments)),
        )


def _messages(message: ModelMessage) -> list[dict[str, Any]]:
    """Our provider-neutral message as chat completion messages (one per tool result)."""
    text = "".join(p["text"] for p in message.parts if p["type"] == "text")
    if message.role == "tool":
        return [
            {
                "role": "tool",
                "tool_call_id": p["tool_call_id"],
                "content": http.as_text(p["output"]),
            }
            for p in message.parts
            if p["type"] == "tool_result"
        ]
    if message.role == "assistant":
        out: dict[str, Any] = {"role": "assistant", "content": text or None}
        calls = [p for p in message.parts if p["type"] == "tool_call"]
        if calls:
            out["tool_calls"] = [
                {
                    "id": p["id"],
                    "type": "function",
                    "function": {"name": p["name"], "arguments": json.dumps(p["args"])},
                }
                for p in calls
            ]
        return [out]
    return [{"role": message.role, "content": text}]


def _classify(exc: openai.OpenAIError) -> ModelError:
    """Timeouts, connection errors, 429 and 5xx are retryable; 400, 401, 403, 404 are not."""
    sdk = http.import_sdk("openai")
    match exc:
        case sdk.APIStatusError(status_code=status):
            return ModelError(
                f"OpenAI-compatible server answered {status}: {exc.message}",
                retryable=http.status_is_retryable(status),
            )
        case sdk.APIConnectionError():
            return ModelError(f"OpenAI-compatible server unreachable: {exc}", retryable=True)
        case sdk.APIError():
            # An error event inside an accepted stream: the server failed mid-answer.
            return ModelError(f"OpenAI-compatible server failed mid-stream: {exc}", retryable=True)
        case _:
            return ModelError(f"OpenAI client error: {exc}")
