"""Cancel (guarantee 11) over real HTTP: running, waiting, twice, by others, after the end."""

from __future__ import annotations

import pytest

from agent_core.choices import CallStatus, RunStatus, StepStatus
from agent_core.models import Run, Step, Thread, ToolCall
from tests.conftest import REFUND
from tests.live.conftest import ALICE, BOB, OTTO, Stream, read_all, start

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def _waiting(client, actor=ALICE):
    started = start(client, REFUND, actor)
    stream = Stream(client, started["run_id"], actor)
    stream.until("approval-requested")
    return started, stream


def test_cancelling_a_waiting_run_settles_it_at_once(shop, a, b):
    started, stream = _waiting(a)
    run_id = started["run_id"]
    response = b.post(f"/agent/chat/{run_id}/cancel", headers=ALICE)
    assert response.status_code == 202 and response.json() == {"status": "cancelled"}
    tail = stream.until("done")
    stream.close()
    kinds = [f.kind for f in tail]
    assert kinds == [
        "step-finish",
        "approval-settled",
        "tool-output-denied",
        "cancelled",
        "finish",
        "done",
    ]
    assert tail[1].data["status"] == "cancelled"
    assert tail[4].data == {"kind": "finish", "status": "cancelled", "error_code": "cancelled"}
    call = ToolCall.objects.get(run_id=run_id)
    assert call.status == CallStatus.CANCELLED
    assert Thread.objects.get(pk=started["thread_id"]).active_run_id is None
    late = a.post("/agent/tool-call/approve", json={"tool_call_id": call.pk}, headers=ALICE)
    assert late.status_code == 409 and late.json()["code"] == "run_not_active"
    again = a.post(f"/agent/chat/{run_id}/cancel", headers=ALICE)
    assert again.status_code == 202 and again.json() == {"status": "cancelled"}
    # The thread is free again; the model is told the call never ran.
    next_turn = start(a, "hello", ALICE, thread_id=started["thread_id"])
    assert read_all(a, next_turn["run_id"], ALICE)[-1].event == "done"
    transcript = a.get(f"/agent/threads/{started['thread_id']}", headers=ALICE).json()
    tool_message = next(m for m in transcript["messages"] if m["role"] == "tool")
    assert "cancelled" in tool_message["content"][0]["output"]


def test_cancelling_a_running_run_aborts_the_model_call(a, b):
    response = a.post("/agent/chat", json={"agent": "live", "message": "slow"}, headers=ALICE)
    run_id = response.json()["run_id"]
    stream = Stream(b, run_id, ALICE)
    stream.until("text")  # the model is streaming, on server A
    cancel = b.post(f"/agent/chat/{run_id}/cancel", headers=ALICE)
    assert cancel.status_code == 202 and cancel.json()["status"] in ("cancelling", "cancelled")
    tail = stream.until("done")
    stream.close()
    assert [f.kind for f in tail[-3:]] == ["cancelled", "finish", "done"]
    run = Run.objects.get(pk=run_id)
    assert run.status == RunStatus.CANCELLED and run.error_code == "cancelled"
    assert run.finished_at is not None and run.cancel_requested
    # The model call never finished: its step was not recorded, no assistant message was kept.
    assert Step.objects.get(run=run, name="llm:0").status == StepStatus.STARTED
    assert not run.messages.filter(role="assistant").exists()
    assert Thread.objects.get(pk=run.thread_id).active_run_id is None
    assert a.post(f"/agent/chat/{run_id}/cancel", headers=ALICE).json() == {"status": "cancelled"}


def test_who_may_cancel(shop, a):
    started, stream = _waiting(a)
    stream.close()
    run_id = started["run_id"]
    assert a.post(f"/agent/chat/{run_id}/cancel").status_code == 401
    stranger = a.post(f"/agent/chat/{run_id}/cancel", headers=BOB)
    assert stranger.status_code == 404 and stranger.json()["code"] == "not_found"
    assert a.post("/agent/chat/run_nope/cancel", headers=ALICE).status_code == 404
    ToolCall.objects.filter(run_id=run_id).update(approver="finance")
    fran = {"X-Actor-Id": "user:fran", "X-Actor-Role": "finance"}
    approver = a.post(f"/agent/chat/{run_id}/cancel", headers=fran)
    assert approver.status_code == 403 and approver.json()["code"] == "forbidden"
    assert Run.objects.get(pk=run_id).status == RunStatus.WAITING  # refusals change nothing
    operator = a.post(f"/agent/chat/{run_id}/cancel", headers=OTTO)
    assert operator.status_code == 202 and operator.json() == {"status": "cancelled"}


def test_cancelling_a_finished_run_is_a_no_op(a):
    started = start(a, "hello", ALICE)
    assert read_all(a, started["run_id"], ALICE)[-1].event == "done"
    response = a.post(f"/agent/chat/{started['run_id']}/cancel", headers=ALICE)
    assert response.status_code == 202 and response.json() == {"status": "completed"}
    assert Run.objects.get(pk=started["run_id"]).status == RunStatus.COMPLETED
