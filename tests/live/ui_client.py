"""A client of the AI SDK UI message stream protocol, as its documentation describes it.

It checks every chunk against the documented shapes (its ``type`` and required fields), then folds
the chunks into one assistant message the way ``useChat`` does: text parts from start/delta/end,
one tool part per ``toolCallId`` moving through its states, and data parts replaced by ``id``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx
from httpx_sse import connect_sse

# The documented chunk types and the fields each must carry (stream-protocol docs).
SHAPES: dict[str, set[str]] = {
    "start": set(),
    "text-start": {"id"},
    "text-delta": {"id", "delta"},
    "text-end": {"id"},
    "tool-input-start": {"toolCallId", "toolName"},
    "tool-input-delta": {"toolCallId", "inputTextDelta"},
    "tool-input-available": {"toolCallId", "toolName", "input"},
    "tool-output-available": {"toolCallId", "output"},
    "tool-output-error": {"toolCallId", "errorText"},
    "tool-output-denied": {"toolCallId"},
    "tool-approval-request": {"approvalId", "toolCallId"},
    "start-step": set(),
    "finish-step": set(),
    "finish": set(),
    "abort": set(),
    "error": {"errorText"},
}


def check(chunk: dict[str, Any]) -> None:
    """Raise unless ``chunk`` has a documented type and that type's fields."""
    kind = chunk.get("type")
    assert isinstance(kind, str), chunk
    if kind.startswith("data-"):
        assert "data" in chunk, chunk
        return
    assert kind in SHAPES, f"undocumented chunk type {kind!r}"
    missing = SHAPES[kind] - set(chunk)
    assert not missing, f"{kind} lacks {missing}: {chunk}"


@dataclass
class UIMessage:
    """The assistant message a ``useChat`` client would hold."""

    id: str = ""
    parts: list[dict[str, Any]] = field(default_factory=list)
    finished: bool = False
    done: bool = False
    _open_text: dict[str, dict[str, Any]] = field(default_factory=dict)

    def apply(self, chunk: dict[str, Any]) -> None:
        check(chunk)
        kind = chunk["type"]
        if kind == "start":
            self.id = self.id or chunk.get("messageId", "")
        elif kind == "text-start":
            part = {"type": "text", "text": "", "state": "streaming"}
            self._open_text[chunk["id"]] = part
            self.parts.append(part)
        elif kind == "text-delta":
            self._open_text[chunk["id"]]["text"] += chunk["delta"]  # KeyError: no text-start
        elif kind == "text-end":
            self._open_text.pop(chunk["id"])["state"] = "done"
        elif kind == "start-step":
            self.parts.append({"type": "step-start"})
        elif kind == "tool-input-available":
            self.parts.append(
                {
                    "type": f"tool-{chunk['toolName']}",
                    "toolCallId": chunk["toolCallId"],
                    "state": "input-available",
                    "input": chunk["input"],
                }
            )
        elif kind == "tool-approval-request":
            self.tool(chunk["toolCallId"]).update(
                state="approval-requested", approval={"id": chunk["approvalId"]}
            )
        elif kind.startswith("tool-output"):
            part = self.tool(chunk["toolCallId"])  # a tool output needs its input first
            part["state"] = {
                "tool-output-available": "output-available",
                "tool-output-error": "output-error",
                "tool-output-denied": "output-denied",
            }[kind]
            part.update({k: chunk[k] for k in ("output", "errorText") if k in chunk})
        elif kind.startswith("data-"):
            same = [
                p
                for p in self.parts
                if p["type"] == kind and "id" in chunk and p.get("id") == chunk["id"]
            ]
            if same:
                same[0]["data"] = chunk["data"]
            else:
                self.parts.append({k: chunk[k] for k in ("type", "id", "data") if k in chunk})
        elif kind == "finish":
            self.finished = True

    def tool(self, call_id: str) -> dict[str, Any]:
        return next(p for p in self.parts if p.get("toolCallId") == call_id)

    @property
    def text(self) -> str:
        return "".join(p["text"] for p in self.parts if p["type"] == "text")


def read_stream(source: Any, message: UIMessage) -> None:
    """Fold an open UI message stream into ``message`` until ``[DONE]``."""
    assert source.response.headers["x-vercel-ai-ui-message-stream"] == "v1"
    for event in source.iter_sse():
        assert event.event == "message"  # the protocol has data lines only
        if event.data == "[DONE]":
            message.done = True
            return
        message.apply(json.loads(event.data))
    raise AssertionError("the stream ended without [DONE]")


@dataclass
class Chat:
    """What ``useChat`` does over ``DefaultChatTransport`` (``ai``'s ``chat.ts`` and
    ``http-chat-transport.ts``): POST ``{id, messages, trigger, messageId, ...body}`` to ``api``
    and fold the answer into the last assistant message (or a new one); resume with GET
    ``{api}/{id}/stream`` (204: nothing to resume); answer approvals in the message and send
    again once every approval of the last step is answered."""

    client: httpx.Client
    id: str
    headers: dict[str, str]
    body: dict[str, Any] = field(default_factory=dict)
    api: str = "/agent/ui-chat"
    messages: list[dict[str, Any]] = field(default_factory=list)

    def send_message(self, text: str) -> httpx.Response | None:
        user = {
            "id": f"u{len(self.messages)}",
            "role": "user",
            "parts": [{"type": "text", "text": text}],
        }
        self.messages.append(user)
        return self._request()

    def add_tool_approval_response(
        self, approval_id: str, approved: bool, reason: str = ""
    ) -> None:
        for part in self.messages[-1]["parts"]:
            if part.get("state") == "approval-requested" and part["approval"]["id"] == approval_id:
                answer = {"id": approval_id, "approved": approved, "reason": reason or None}
                part.update(state="approval-responded", approval=answer)

    def complete_with_approval_responses(self) -> bool:
        """``lastAssistantMessageIsCompleteWithApprovalResponses``."""
        last = self.messages[-1] if self.messages else None
        if last is None or last["role"] != "assistant":
            return False
        starts = [i for i, p in enumerate(last["parts"]) if p["type"] == "step-start"]
        step = last["parts"][(starts[-1] + 1 if starts else 0) :]
        tools = [p for p in step if p["type"].startswith("tool-")]
        done = ("output-available", "output-error", "approval-responded")
        return any(p["state"] == "approval-responded" for p in tools) and all(
            p["state"] in done for p in tools
        )

    def send_automatically(self) -> httpx.Response | None:
        assert self.complete_with_approval_responses()
        return self._request()

    def resume(self) -> int:
        """``resumeStream``: the status of the GET (204 leaves the messages as they are)."""
        url = f"{self.api}/{self.id}/stream"
        with connect_sse(self.client, "GET", url, headers={**self.headers}) as source:
            if source.response.status_code == 200:
                self._fold(source)
            return source.response.status_code

    @property
    def last(self) -> UIMessage:
        message = self.messages[-1]
        assert message["role"] == "assistant"
        return message["_folded"]

    def _request(self) -> httpx.Response | None:
        wire = [{k: v for k, v in m.items() if k != "_folded"} for m in self.messages]
        body = {**self.body, "id": self.id, "messages": wire, "trigger": "submit-message"}
        body["messageId"] = None
        with connect_sse(
            self.client, "POST", self.api, json=body, headers={**self.headers}
        ) as source:
            if source.response.status_code != 200:
                source.response.read()
                return source.response
            self._fold(source)
        return None

    def _fold(self, source: Any) -> None:
        last = self.messages[-1] if self.messages else None
        if last is not None and last["role"] == "assistant":
            message: UIMessage = last["_folded"]
            message.parts = last["parts"]  # the answers given in place are part of it
            message.finished = message.done = False
        else:
            message = UIMessage()
            last = {"role": "assistant", "_folded": message}
            self.messages.append(last)
        read_stream(source, message)
        last.update(id=message.id, parts=message.parts)
