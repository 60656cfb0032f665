"""The two vendors' streaming wire formats, as a fake server sends them."""

from __future__ import annotations

import json
from typing import Any


def sse(data: Any, *, event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    payload = data if isinstance(data, str) else json.dumps(data)
    return f"{head}data: {payload}\n\n"


# --- OpenAI chat completions ----------------------------------------------------------------------


def openai_chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    return sse(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "test-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
    )


def openai_usage(prompt: int, completion: int, cached: int | None = None) -> str:
    details = {} if cached is None else {"prompt_tokens_details": {"cached_tokens": cached}}
    return sse(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "test-model",
            "choices": [],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
                **details,
            },
        }
    )


def openai_text(*pieces: str, usage: tuple[int, ...] = (11, 7)) -> list[str]:
    events = [openai_chunk({"role": "assistant", "content": ""})]
    events += [openai_chunk({"content": p}) for p in pieces]
    events += [openai_chunk({}, "stop"), openai_usage(*usage), sse("[DONE]")]
    return events


def openai_tool_calls(*calls: tuple[str, str, dict[str, Any]], text: str = "") -> list[str]:
    """Parallel tool calls, each id/name first, then its arguments in two fragments, interleaved."""
    events = [openai_chunk({"role": "assistant", "content": text or None})]
    fragments: list[list[str]] = []
    for index, (call_id, name, args) in enumerate(calls):
        raw = json.dumps(args)
        fragments.append([raw[: len(raw) // 2], raw[len(raw) // 2 :]])
        head = {"index": index, "id": call_id, "type": "function"}
        head["function"] = {"name": name, "arguments": ""}
        events.append(openai_chunk({"tool_calls": [head]}))
    for half in (0, 1):
        for index in range(len(calls)):
            piece = {"index": index, "function": {"arguments": fragments[index][half]}}
            events.append(openai_chunk({"tool_calls": [piece]}))
    events += [openai_chunk({}, "tool_calls"), openai_usage(20, 9), sse("[DONE]")]
    return events


# --- Anthropic messages ---------------------------------------------------------------------------


def _anthropic(kind: str, **data: Any) -> str:
    return sse({"type": kind, **data}, event=kind)


def anthropic_start(input_tokens: int = 13, cached: int | None = None) -> str:
    usage: dict[str, Any] = {"input_tokens": input_tokens, "output_tokens": 1}
    if cached is not None:
        usage["cache_read_input_tokens"] = cached
    message: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "test-model",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    return _anthropic("message_start", message=message)


def anthropic_end(stop_reason: str, output_tokens: int) -> list[str]:
    return [
        _anthropic(
            "message_delta",
            delta={"stop_reason": stop_reason, "stop_sequence": None},
            usage={"output_tokens": output_tokens},
        ),
        _anthropic("message_stop"),
    ]


def anthropic_text_block(index: int, *pieces: str) -> list[str]:
    events = [
        _anthropic("content_block_start", index=index, content_block={"type": "text", "text": ""})
    ]
    events += [
        _anthropic("content_block_delta", index=index, delta={"type": "text_delta", "text": p})
        for p in pieces
    ]
    return [*events, _anthropic("content_block_stop", index=index)]


def anthropic_tool_block(index: int, call_id: str, name: str, args: dict[str, Any]) -> list[str]:
    raw = json.dumps(args)
    block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
    events = [_anthropic("content_block_start", index=index, content_block=block)]
    for piece in (raw[: len(raw) // 2], raw[len(raw) // 2 :]):
        delta = {"type": "input_json_delta", "partial_json": piece}
        events.append(_anthropic("content_block_delta", index=index, delta=delta))
    return [*events, _anthropic("content_block_stop", index=index)]


def anthropic_text(*pieces: str, cached: int | None = None) -> list[str]:
    start = anthropic_start(cached=cached)
    return [start, *anthropic_text_block(0, *pieces), *anthropic_end("end_turn", 5)]


def anthropic_tool_calls(*calls: tuple[str, str, dict[str, Any]], text: str = "") -> list[str]:
    events = [anthropic_start(21)]
    offset = 0
    if text:
        events += anthropic_text_block(0, text)
        offset = 1
    for i, (call_id, name, args) in enumerate(calls):
        events += anthropic_tool_block(i + offset, call_id, name, args)
    return [*events, *anthropic_end("tool_use", 17)]
