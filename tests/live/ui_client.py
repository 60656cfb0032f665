"""A client of the AI SDK UI message stream protocol, as its documentation describes it.

It checks every chunk against the documented shapes (its ``type`` and required fields), then folds
the chunks into one assistant message the way ``useChat`` does: text parts from start/delta/end,
one tool part per ``toolCallId`` moving through its states, and data parts replaced by ``id``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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
