"""A run's stream in the Vercel AI SDK's UI message stream protocol (``useChat``'s data stream).

``GET /agent/chat/<run_id>/ui-stream`` serves the same frames as ``…/stream`` (SPEC §9),
translated chunk by chunk: text as ``text-start`` / ``text-delta`` / ``text-end``, steps as
``start-step`` / ``finish-step``, tool calls as ``tool-input-available`` and
``tool-output-available`` / ``tool-output-error`` / ``tool-output-denied``, a cancel as ``abort``,
the end as ``finish`` then ``data: [DONE]``. What the protocol has no chunk for arrives as data
parts: one ``data-approval`` part per call (``id`` = the call's id, so later events replace it in
the message: requested, progress, escalated, extended, settled) and ``data-<kind>`` for the rest
(``input-requested``, ``delegated``, ``tool-in-doubt``). The last chunk of each frame carries the
frame's number as its SSE ``id``, so a client resumes exactly as on the native stream
(``Last-Event-ID`` or ``?after=n``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Any, cast

from django.http import HttpRequest, HttpResponseBase, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from ..choices import RunStatus
from ..models import Run
from . import live, sse

HEADER = "x-vercel-ai-ui-message-stream"
Chunk = dict[str, Any]

_APPROVAL_EVENTS = frozenset(
    {
        "approval-requested",
        "approval-progress",
        "approval-escalated",
        "approval-extended",
        "approval-settled",
    }
)

# Frames after which a run may have stopped to wait on a person (its status is written in the
# transaction that writes them): where a chat's response (``until_parked``) looks whether to end.
_PARK_POINTS = frozenset(
    {
        *_APPROVAL_EVENTS,
        "step-finish",
        "input-requested",
        "tool-output",
        "tool-output-error",
        "tool-output-denied",
        "tool-in-doubt",
    }
)


class Translator:
    """Turns one attach's events into UI message chunks, keeping the open text block."""

    def __init__(self) -> None:
        self.text_id: str | None = None

    def chunks(self, event: live.Event) -> list[Chunk]:
        """The chunks of one event (``meta``, a frame, ``done`` / ``error``)."""
        data = dict(event.data)
        match event.kind:
            case "meta":
                return [{"type": "start", "messageId": data["run_id"]}]
            case "error":
                return [*self.close_text(), {"type": "error", "errorText": data["message"]}]
            case "frame":
                kind = data.pop("kind")
                return self._frame(kind, data, event.seq or 0)
        return []

    def _frame(self, kind: str, data: dict[str, Any], seq: int) -> list[Chunk]:
        call_id = data.get("tool_call_id")
        if "run_id" in data and kind not in _APPROVAL_EVENTS:
            # A child run's frame (SPEC §14): its cards are this stream's; the rest is its own.
            return [{"type": "data-child", "data": {"kind": kind, **data}}]
        match kind:
            case "text":
                return self._text(data, seq)
            case "step-start":
                return [*self.close_text(), {"type": "start-step"}]
            case "step-finish":
                return [*self.close_text(), {"type": "finish-step"}]
            case "tool-input-available":
                return [
                    *self.close_text(),
                    {
                        "type": "tool-input-available",
                        "toolCallId": call_id,
                        "toolName": data["tool_name"],
                        "input": data["input"],
                    },
                ]
            case "tool-output":
                return [
                    {
                        "type": "tool-output-available",
                        "toolCallId": call_id,
                        "output": data["output"],
                    }
                ]
            case "tool-output-error":
                return [
                    {"type": "tool-output-error", "toolCallId": call_id, "errorText": data["error"]}
                ]
            case "tool-output-denied":
                denied = {"event": kind, **data}
                return [
                    {"type": "data-approval", "id": call_id, "data": denied},
                    {"type": "tool-output-denied", "toolCallId": call_id},
                ]
            case "cancelled":
                return [*self.close_text(), {"type": "abort", "reason": "cancelled"}]
            case "finish":
                return [*self.close_text(), {"type": "finish"}]
            case _ if kind in _APPROVAL_EVENTS:
                part = {"type": "data-approval", "id": call_id, "data": {"event": kind, **data}}
                return [part, *_approval_chunks(kind, data)]
        return [{"type": f"data-{kind}", "data": data}]

    def _text(self, data: dict[str, Any], seq: int) -> list[Chunk]:
        if data.get("superseded"):
            return []  # a model attempt a crash cut short: its text was replaced
        opened: list[Chunk] = []
        if self.text_id is None:
            self.text_id = f"text-{seq}"
            opened.append({"type": "text-start", "id": self.text_id})
        return [*opened, {"type": "text-delta", "id": self.text_id, "delta": data["text"]}]

    def close_text(self) -> list[Chunk]:
        if self.text_id is None:
            return []
        closed, self.text_id = [{"type": "text-end", "id": self.text_id}], None
        return closed


def _approval_chunks(kind: str, data: dict[str, Any]) -> list[Chunk]:
    """The protocol's own approval request (``approvalId`` is the call's id): it puts the tool
    part in ``approval-requested``, which a ``useChat`` client answers with
    ``addToolApprovalResponse``. No ``tool-approval-response`` chunk follows a decision: AI SDK 6
    clients refuse that chunk type (7 knows it), and the answering client has marked the part
    itself; the tool's output (or ``tool-output-denied``) settles it for everyone."""
    if kind != "approval-requested":
        return []
    call_id = data["tool_call_id"]
    return [{"type": "tool-approval-request", "approvalId": call_id, "toolCallId": call_id}]


def encode(events: list[live.Event]) -> bytes:
    """The SSE bytes of ``events`` translated (a helper for tests and one-shot replays)."""
    translator = Translator()
    return b"".join(_block(translator, event) for event in events)


def _json(chunk: Chunk) -> str:
    return json.dumps(chunk, separators=(",", ":"), default=str)


def _block(translator: Translator, event: live.Event) -> bytes:
    if event.kind == "keepalive":
        return sse.KEEPALIVE
    if event.kind == "done":
        return b"data: [DONE]\n\n"
    chunks = translator.chunks(event)
    out = []
    for i, chunk in enumerate(chunks):
        data = _json(chunk)
        last_of_frame = event.kind == "frame" and i == len(chunks) - 1
        out.append(f"id: {event.seq}\ndata: {data}\n\n" if last_of_frame else f"data: {data}\n\n")
    if event.kind == "error":
        out.append("data: [DONE]\n\n")
    return "".join(out).encode()


@csrf_exempt  # it only reads (GET); any other method is a JSON 405 (sse.attach)
async def ui_stream_view(request: HttpRequest, run_id: str) -> HttpResponseBase:
    """The run's stream in the UI message stream protocol; resumable like the native one."""
    attached = await sse.attach(request, run_id)
    if not isinstance(attached, tuple):
        return attached
    run, after = attached
    return stream_response(run, after)


def stream_response(run: Run, after: int, *, until_parked: bool = False) -> StreamingHttpResponse:
    """The UI message stream of ``run`` after frame ``after``, with the protocol's headers.

    ``until_parked``: the response of a chat request ends (``finish``, ``[DONE]``) as soon as
    the run waits on a person, as an AI SDK server's does when its step ends on an approval
    request; the client answers with its next request. Otherwise it follows the run to its end.
    """
    response = StreamingHttpResponse(_stream(run, after, until_parked))
    response["Content-Type"] = "text/event-stream"
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    response[HEADER] = "v1"
    return response


def reply_response(text: str, message_id: str) -> StreamingHttpResponse:
    """A UI message stream of one short assistant message that no run made (a text decision's
    reply, SPEC §17): ``text`` whole, then ``finish`` and ``[DONE]``."""
    chunks: list[Chunk] = [
        {"type": "start", "messageId": message_id},
        {"type": "text-start", "id": message_id},
        {"type": "text-delta", "id": message_id, "delta": text},
        {"type": "text-end", "id": message_id},
        {"type": "finish"},
    ]
    body = "".join(f"data: {_json(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n"
    response = StreamingHttpResponse(iter([body.encode()]))
    response["Content-Type"] = "text/event-stream"
    response["Cache-Control"] = "no-cache"
    response[HEADER] = "v1"
    return response


def parked(run_id: str, seq: int) -> bool:
    """Whether the run waits on a person with no frame after ``seq`` (sync; through
    ``live.read``)."""
    return Run.objects.filter(pk=run_id, status=RunStatus.WAITING, last_seq__lte=seq).exists()


async def _stream(run: Run, after: int, until_parked: bool) -> AsyncIterator[bytes]:
    translator = Translator()
    events = cast(AsyncGenerator[live.Event, None], live.follow(run, after))
    last = after
    async with aclosing(events):
        async for event in events:
            yield _block(translator, event)
            if not until_parked:
                continue
            if event.kind == "frame":
                last = event.seq or last
                if event.data["kind"] not in _PARK_POINTS:
                    continue
            if event.kind in ("meta", "frame", "keepalive") and await live.read(
                parked, run.pk, last
            ):
                ending = [*translator.close_text(), {"type": "finish"}]
                yield "".join(f"data: {_json(chunk)}\n\n" for chunk in ending).encode()
                yield b"data: [DONE]\n\n"
                return
