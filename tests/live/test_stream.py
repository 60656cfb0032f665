"""The SSE stream over real HTTP against real daphne processes (SPEC §9)."""

from __future__ import annotations

import httpx
import pytest

from agent_core.models import Run, StreamFrame, ToolCall
from tests.conftest import REFUND
from tests.live.conftest import ALICE, BOB, FRAN, Stream, read_all, start

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

APPROVE_FLOW = [
    "step-start",
    "tool-input-available",
    "approval-requested",
    "step-finish",
    "approval-settled",
    "tool-output",
    "step-start",
    "text",
    "step-finish",
    "finish",
]


def _dedupe_text(kinds: list[str]) -> list[str]:
    return [k for i, k in enumerate(kinds) if not (k == "text" and i and kinds[i - 1] == "text")]


def _approve(client: httpx.Client, run_id: str) -> None:
    """Alice approves over HTTP, on whichever server ``client`` talks to."""
    call = ToolCall.objects.get(run_id=run_id)
    response = client.post(
        "/agent/tool-call/approve", json={"tool_call_id": call.pk}, headers=ALICE
    )
    assert response.status_code == 200 and response.json()["outcome"] == "applied"


def test_the_approve_flow_streams_every_frame_in_order_on_another_process(shop, a, b):
    started = start(a, REFUND, ALICE)
    assert started["stream_url"] == f"/agent/chat/{started['run_id']}/stream"
    stream = Stream(b, started["run_id"], ALICE)  # server A drives, server B streams
    assert stream.response.headers["content-type"].startswith("text/event-stream")
    meta = stream.next()
    assert meta.event == "meta" and meta.id is None
    assert meta.data == {"run_id": started["run_id"], "thread_id": started["thread_id"]}
    first = stream.until("step-finish")  # the run now waits on Alice; the stream stays open
    _approve(a, started["run_id"])
    rest = stream.until("done")
    stream.close()
    frames = [f for f in first + rest if f.event == "message"]
    assert _dedupe_text([f.kind for f in frames]) == APPROVE_FLOW
    assert [f.id for f in frames] == list(range(1, len(frames) + 1))
    assert rest[-1].event == "done" and rest[-1].data == {"status": "completed"}
    settled = next(f for f in frames if f.kind == "approval-settled")
    assert settled.data["status"] == "approved" and settled.data["decided_by"] == "user:alice"
    stored = StreamFrame.objects.filter(run_id=started["run_id"]).order_by("seq")
    assert [(f.id, f.data) for f in frames] == [(s.seq, s.as_event()) for s in stored]


def test_reconnecting_yields_exactly_the_missing_frames(shop, a, b):
    started = start(a, REFUND, ALICE)
    run_id = started["run_id"]
    stream = Stream(a, run_id, ALICE)
    seen = [f for f in stream.until("approval-requested") if f.event == "message"]
    stream.close()  # the connection drops mid-run
    last = seen[-1].id
    resumed = Stream(b, run_id, ALICE, headers={**ALICE, "Last-Event-ID": str(last)})
    assert resumed.next().event == "meta"
    _approve(b, run_id)
    tail = [f for f in resumed.until("done") if f.event == "message"]
    resumed.close()
    everything = [f for f in read_all(a, run_id, ALICE) if f.event == "message"]
    assert seen + tail == everything  # nothing lost, nothing twice, the same ids
    # ?after= wins over Last-Event-ID, and replays exactly the suffix.
    suffix = read_all(
        b, run_id, ALICE, params={"after": 3}, headers={**ALICE, "Last-Event-ID": "1"}
    )
    assert [f for f in suffix if f.event == "message"] == everything[3:]
    assert suffix[0].event == "meta" and suffix[-1].event == "done"
    # After the last frame: just meta and done.
    after_end = read_all(a, run_id, ALICE, params={"after": everything[-1].id})
    assert [f.event for f in after_end] == ["meta", "done"]


def test_a_waiting_run_keeps_the_stream_open_with_keepalive_comments(shop, a, servers):
    started = start(a, REFUND, ALICE)
    with httpx.Client(base_url=servers[1].url, timeout=60) as client:
        url = f"/agent/chat/{started['run_id']}/stream"
        with client.stream("GET", url, headers=ALICE) as response:
            lines = response.iter_lines()
            for line in lines:
                if line.startswith("data:") and '"approval-requested"' in line:
                    break
            comments = []
            for line in lines:  # server B sends one every second while the run waits
                if line.startswith(":"):
                    comments.append(line)
                if len(comments) == 2:
                    break
    assert comments == [": keep-alive", ": keep-alive"]


def test_a_failed_run_ends_with_a_generic_error_and_keeps_the_detail(a, b):
    response = a.post("/agent/chat", json={"agent": "live", "message": "fail"}, headers=ALICE)
    assert response.status_code == 202
    run_id = response.json()["run_id"]
    frames = read_all(b, run_id, ALICE)
    assert frames[-1].event == "error"
    assert frames[-1].data == {"code": "model_error", "message": "The run failed."}
    assert frames[-2].kind == "finish" and frames[-2].data["status"] == "failed"
    detail = a.get(f"/agent/runs/{run_id}", headers=ALICE).json()
    assert detail["status"] == "failed" and detail["error_code"] == "model_error"
    assert detail["error_message"] is None  # production: the detail stays on the row and the log
    assert "sk-live-123" in Run.objects.get(pk=run_id).error_message
    assert "sk-live-123" not in str(frames)


@pytest.mark.parametrize(
    ("headers", "params", "status", "code"),
    [
        ({}, {}, 401, "not_authenticated"),
        (BOB, {}, 404, "not_found"),
        (ALICE, {"after": "x"}, 400, "invalid"),
        ({**ALICE, "Last-Event-ID": "-1"}, {}, 400, "invalid"),
    ],
)
def test_stream_refusals(shop, a, headers, params, status, code):
    started = start(a, REFUND, ALICE)
    response = a.get(f"/agent/chat/{started['run_id']}/stream", headers=headers, params=params)
    assert response.status_code == status
    assert response.json()["code"] == code


def test_an_unknown_run_is_404_and_an_approver_may_follow(shop, a):
    assert a.get("/agent/chat/run_nope/stream", headers=ALICE).status_code == 404
    response = a.post(
        "/agent/chat",
        json={"agent": "support", "message": '/call send_campaign {"campaign_id": "spring-sale"}'},
        headers=ALICE,
    )
    run_id = response.json()["run_id"]
    waiting = Stream(a, run_id, ALICE)
    waiting.until("approval-requested")
    waiting.close()
    call = ToolCall.objects.get(run_id=run_id)
    assert call.approver == "requester"  # the default policy: Fran cannot see this run
    assert a.get(f"/agent/chat/{run_id}/stream", headers=FRAN).status_code == 404
    ToolCall.objects.filter(pk=call.pk).update(approver="finance")
    stream = Stream(a, run_id, FRAN)
    assert stream.next().event == "meta"
    stream.close()
