"""The UI message stream translation of every frame kind, checked against the documented shapes."""

from __future__ import annotations

import json

from agent_core.streams import aisdk
from agent_core.streams.live import Event
from tests.live.ui_client import UIMessage, check


def frame(seq: int, kind: str, **data: object) -> Event:
    return Event("frame", {"kind": kind, **data}, seq)


EVENTS = [
    Event("meta", {"run_id": "run_1", "thread_id": "thr_1"}),
    frame(1, "step-start", step="llm:0", attempt=1),
    frame(2, "text", text="Let me "),
    frame(3, "text", text="check."),
    frame(
        4,
        "tool-input-available",
        tool_call_id="tc_1",
        tool_name="wire",
        tool_kind="action",
        input={"to": "x"},
    ),
    frame(
        5,
        "approval-requested",
        tool_call_id="tc_1",
        approver="finance",
        expires_at=None,
        confirmation="",
    ),
    frame(6, "input-requested", tool_call_id="tc_2", schema={}, prompt="Why?"),
    frame(7, "step-finish", step="llm:0", usage={}),
    frame(
        8,
        "approval-settled",
        tool_call_id="tc_1",
        status="rejected",
        decided_by="u",
        decided_via="api",
        remember=False,
        reason="no",
    ),
    frame(9, "tool-output-denied", tool_call_id="tc_1", reason="no"),
    frame(10, "tool-output-error", tool_call_id="tc_3", error="boom"),
    frame(11, "text", text="old", superseded=True),
    frame(12, "cancelled"),
    frame(13, "finish", status="cancelled", error_code=""),
    Event("done", {"status": "cancelled"}),
]


def blocks(raw: bytes) -> list[tuple[str | None, str]]:
    out = []
    for block in raw.decode().split("\n\n"):
        if not block:
            continue
        lines = dict(line.split(": ", 1) for line in block.split("\n"))
        out.append((lines.get("id"), lines["data"]))
    return out


def test_every_frame_becomes_documented_chunks_and_each_frame_ends_on_its_id():
    sent = blocks(aisdk.encode(EVENTS))
    assert sent[-1] == (None, "[DONE]")
    chunks = [json.loads(data) for _, data in sent[:-1]]
    for chunk in chunks:
        check(chunk)
    assert [c["type"] for c in chunks] == [
        "start",
        "start-step",
        "text-start",
        "text-delta",
        "text-delta",
        "text-end",
        "tool-input-available",
        "data-approval",
        "tool-approval-request",
        "data-input-requested",
        "finish-step",
        "data-approval",
        "data-approval",
        "tool-output-denied",
        "tool-output-error",
        "abort",
        "finish",
    ]
    ids = [int(i) for i, _ in sent if i is not None]
    assert ids == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 13]  # superseded text sends nothing
    message = UIMessage()
    message.parts.append({"type": "tool-x", "toolCallId": "tc_3", "state": "input-available"})
    for chunk in chunks:
        message.apply(chunk)
    assert message.text == "Let me check." and message.finished
    assert message.tool("tc_1")["state"] == "output-denied"
    assert message.tool("tc_1")["approval"] == {"id": "tc_1"}
    [approval] = [p for p in message.parts if p["type"] == "data-approval"]
    assert approval["data"] == {
        "event": "tool-output-denied",
        "tool_call_id": "tc_1",
        "reason": "no",
    }


def test_an_error_ends_the_message_with_an_error_chunk_then_done():
    sent = blocks(
        aisdk.encode(
            [
                Event("meta", {"run_id": "r", "thread_id": "t"}),
                frame(1, "text", text="a"),
                Event("error", {"code": "model_error", "message": "The run failed."}),
            ]
        )
    )
    assert [d for _, d in sent][-3:] == [
        '{"type":"text-end","id":"text-1"}',
        '{"type":"error","errorText":"The run failed."}',
        "[DONE]",
    ]
