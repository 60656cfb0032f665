"""Scripted models for tests and the demo: no network, deterministic, streamed word by word.

``scripted:demo`` follows a small grammar (see the README, "The demo model"):

* a user message with lines ``/call <tool> <json args>`` calls those tools, one call a line;
* after tool results it answers with a short text that mentions each result;
* otherwise it answers by keyword rules.

Tests register their own scripts with ``register_script(name, fn)`` and use ``scripted:<name>``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..exceptions import ModelError
from ..tools import AbortSignal
from .base import Finish, ModelEvent, ModelMessage, ModelRequest, TextDelta, ToolCallPart, Usage


@dataclass(frozen=True)
class Reply:
    """What a script answers: some text and/or tool calls ``(name, args)``."""

    text: str = ""
    calls: list[tuple[str, dict[str, Any] | str]] = field(default_factory=list)


Script = Callable[[ModelRequest], Reply]
_SCRIPTS: dict[str, Script] = {}


def register_script(name: str, script: Script) -> None:
    """Make ``scripted:<name>`` answer with ``script``."""
    _SCRIPTS[name] = script


class ScriptedProvider:
    """Streams a registered script's reply as model events."""

    def __init__(self, name: str) -> None:
        self.name = name

    def stream(self, request: ModelRequest, *, abort: AbortSignal) -> Iterator[ModelEvent]:
        try:
            script = _SCRIPTS[self.name]
        except KeyError:
            raise ModelError(f"no scripted model called {self.name!r}") from None
        reply = script(request)
        for word in re.findall(r"\S+\s*", reply.text):
            if abort.is_set():
                raise ModelError("aborted")
            yield TextDelta(word)
        for i, (name, args) in enumerate(reply.calls):
            yield ToolCallPart(provider_call_id=f"call_{i}", name=name, args=args)
        prompt_words = sum(len(str(p).split()) for m in request.messages for p in m.parts)
        yield Usage(input_tokens=prompt_words, output_tokens=len(reply.text.split()))
        yield Finish("tool_calls" if reply.calls else "stop")


_CALL_LINE = re.compile(r"^\s*/call\s+(?P<name>[\w.-]+)\s*(?P<args>.*)$")


def parse_calls(text: str) -> list[tuple[str, dict[str, Any] | str]]:
    """The ``/call <tool> <json>`` lines of a message; args that are not JSON stay a string."""
    calls: list[tuple[str, dict[str, Any] | str]] = []
    for line in text.splitlines():
        match = _CALL_LINE.match(line)
        if not match:
            continue
        raw = match["args"].strip() or "{}"
        try:
            args: dict[str, Any] | str = json.loads(raw)
        except json.JSONDecodeError:
            args = raw
        calls.append((match["name"], args))
    return calls


def _describe_result(part: dict[str, Any]) -> str:
    output = part.get("output")
    shown = output if isinstance(output, str) else json.dumps(output, sort_keys=True)
    if part.get("is_error"):
        return f"{part.get('tool_name')} did not succeed: {shown}"
    return f"{part.get('tool_name')} returned {shown}"


_KEYWORD_REPLIES: list[tuple[tuple[str, ...], str]] = [
    (
        ("hello", "hi", "hey"),
        "Hello! I can look up orders, issue refunds, send campaigns and "
        "purge caches. Type /call <tool> <json args> to make me call a tool.",
    ),
    (
        ("refund",),
        'To refund an order, try: /call issue_refund {"order_id": "A-1001", '
        '"amount": 25}. A refund needs an approver\'s yes before it runs.',
    ),
    (("order",), 'To look up an order, try: /call lookup_order {"order_id": "A-1001"}.'),
    (
        ("campaign", "email"),
        "To send a campaign, try: /call send_campaign "
        '{"campaign_id": "spring-sale"}. It waits for marketing\'s approval.',
    ),
    (("cache", "purge"), 'To purge a cache, try: /call purge_cache {"path": "/products"}.'),
]


def demo_script(request: ModelRequest) -> Reply:
    """The demo model: ``/call`` lines, a summary after tool results, keyword answers otherwise."""
    last: ModelMessage | None = request.messages[-1] if request.messages else None
    if last is not None and last.role == "tool":
        results = [p for m in _trailing_tool_messages(request.messages) for p in m.parts]
        return Reply(text="Done. " + "; ".join(_describe_result(p) for p in results) + ".")
    text = "".join(p.get("text", "") for p in last.parts) if last is not None else ""
    calls = parse_calls(text)
    if calls:
        return Reply(calls=calls)
    lowered = text.lower()
    for words, answer in _KEYWORD_REPLIES:
        if any(re.search(rf"\b{w}\b", lowered) for w in words):
            return Reply(text=answer)
    return Reply(text=f"You said: {text.strip()}. Say 'help' or use /call <tool> <json args>.")


def _trailing_tool_messages(messages: list[ModelMessage]) -> list[ModelMessage]:
    trailing: list[ModelMessage] = []
    for message in reversed(messages):
        if message.role != "tool":
            break
        trailing.insert(0, message)
    return trailing


register_script("demo", demo_script)
