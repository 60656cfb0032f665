"""A delegated child's frames in its parent's SSE stream (SPEC §9, §14), over real HTTP: numbered
in the parent's sequence on every attach, carrying the child's ``run_id``; the pending list names
the chain; a decision by tool call id alone finds the child."""

from __future__ import annotations

import json

import pytest

from agent_core.models import Run, StreamFrame, ToolCall
from tests.live.conftest import ALICE, Stream, read_all, start

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

REFUND = '/call issue_refund {"order_id": "A-1001", "amount": 30}'


def test_a_childs_card_streams_in_the_parent_and_is_decided_by_id(shop, a, b):
    started = start(a, f"/call ask_billing {json.dumps({'message': REFUND})}", ALICE)
    stream = Stream(b, started["run_id"], ALICE)
    head = stream.until("approval-requested")
    card = head[-1]
    child = Run.objects.get(parent_run_id=started["run_id"])
    assert card.data["run_id"] == child.pk and card.data["parent_tool_call_id"]
    delegated = next(f for f in head if f.kind == "delegated")
    assert delegated.data["child_run_id"] == child.pk and delegated.data["agent"] == "billing"
    pending = a.get("/agent/approvals/pending", headers=ALICE).json()["results"]
    [row] = [r for r in pending if r["tool_call_id"] == card.data["tool_call_id"]]
    assert row["chain"] == ["support", "billing"] and row["run_id"] == child.pk
    approved = a.post(
        "/agent/tool-call/approve", json={"tool_call_id": row["tool_call_id"]}, headers=ALICE
    )
    assert approved.status_code == 200
    rest = stream.until("done")
    stream.close()
    frames = [f for f in head + rest if f.event == "message"]
    assert [f.id for f in frames] == list(range(1, len(frames) + 1))
    finishes = [f for f in frames if f.kind == "finish"]
    assert finishes[0].data["run_id"] == child.pk and "run_id" not in finishes[-1].data
    assert frames[-1].kind == "finish" and rest[-1].data == {"status": "completed"}
    # A second attach, on the other process, gets the same numbers.
    again = [f for f in read_all(a, started["run_id"], ALICE) if f.event == "message"]
    assert [(f.id, f.data) for f in again] == [(f.id, f.data) for f in frames]
    stored = StreamFrame.objects.filter(run_id=started["run_id"]).count()
    assert stored == len(frames)
    detail = a.get(f"/agent/runs/{started['run_id']}", headers=ALICE).json()
    [shown] = detail["children"]
    assert shown["id"] == child.pk and shown["status"] == "completed"
    assert shown["parent_tool_call_id"] == ToolCall.objects.get(run_id=started["run_id"]).pk
