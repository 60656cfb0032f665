"""The AI SDK UI message stream adapter, over real HTTP against real daphne, read by a client
that follows the protocol's documented frame shapes (``tests/live/ui_client.py``)."""

from __future__ import annotations

import json

import httpx
import pytest
from httpx_sse import connect_sse

from agent_core.models import ToolCall
from tests.conftest import REFUND
from tests.live.conftest import ALICE, BOB, start
from tests.live.ui_client import UIMessage

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def read(
    client: httpx.Client, run_id: str, message: UIMessage, *, until: str = "", **headers: str
) -> int | None:
    """Fold the stream into ``message`` until ``[DONE]`` (or the first chunk of type ``until``);
    the last SSE id seen."""
    last: int | None = None
    url = f"/agent/chat/{run_id}/ui-stream"
    with connect_sse(client, "GET", url, headers={**ALICE, **headers}) as source:
        assert source.response.headers["x-vercel-ai-ui-message-stream"] == "v1"
        assert source.response.headers["content-type"].startswith("text/event-stream")
        for event in source.iter_sse():
            assert event.event == "message"  # the protocol has data lines only
            if event.id:
                last = int(event.id)
            if event.data == "[DONE]":
                message.done = True
                return last
            chunk = json.loads(event.data)
            message.apply(chunk)
            if chunk["type"] == until:
                return last
    raise AssertionError("the stream ended without [DONE]")


def test_use_chat_reads_an_approval_flow_resumes_after_a_drop_and_ends_with_done(shop, a, b):
    started = start(a, REFUND, ALICE)
    run_id = started["run_id"]
    message = UIMessage()
    last = read(b, run_id, message, until="data-approval")
    assert message.id == run_id and last is not None
    call = ToolCall.objects.get(run_id=run_id)
    tool = message.tool(call.pk)
    assert (tool["type"], tool["state"], tool["input"]["order_id"]) == (
        "tool-issue_refund",
        "input-available",
        "A-1001",
    )
    [approval] = [p for p in message.parts if p["type"] == "data-approval"]
    assert approval["id"] == call.pk and approval["data"]["event"] == "approval-requested"

    # The connection dropped; the run is approved meanwhile; the client resumes from its last id.
    approved = a.post("/agent/tool-call/approve", json={"tool_call_id": call.pk}, headers=ALICE)
    assert approved.status_code == 200
    read(a, run_id, message, **{"Last-Event-ID": str(last)})
    assert message.done and message.finished
    assert message.tool(call.pk)["state"] == "output-available"
    [approval] = [p for p in message.parts if p["type"] == "data-approval"]  # replaced, not added
    assert approval["data"]["event"] == "approval-settled"
    assert approval["data"]["status"] == "approved"
    assert message.text  # the model's answer after the tool ran

    # One uninterrupted read gives the same message.
    whole = UIMessage()
    read(b, run_id, whole)
    assert whole.parts == message.parts


def test_the_ui_stream_refuses_like_the_native_one(shop, a):
    started = start(a, REFUND, ALICE)
    url = f"/agent/chat/{started['run_id']}/ui-stream"
    assert a.get(url, headers=BOB).status_code == 404
    assert a.get(url).status_code == 401
    bad = a.get(url, headers={**ALICE, "Last-Event-ID": "x"})
    assert bad.status_code == 400 and bad.json()["code"] == "invalid"
