"""Turns sent while the agent works, over real HTTP: reject, queue (in order, once), interrupt."""

from __future__ import annotations

import time

import httpx
import pytest

from agent_core.choices import CallStatus, RunStatus
from agent_core.models import QueuedMessage, Run, ToolCall
from tests.conftest import REFUND
from tests.live.conftest import ALICE, BOB, Stream, read_all, start

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def send(client: httpx.Client, thread_id: str, message: str, mode: str) -> httpx.Response:
    body = {"agent": "live", "message": message, "thread_id": thread_id, "mode": mode}
    return client.post("/agent/chat", json=body, headers=ALICE)


def busy_thread(client: httpx.Client) -> dict[str, str]:
    """A thread whose run streams slowly until it is cancelled."""
    started = start(client, "slow", ALICE, agent="live")
    stream = Stream(client, started["run_id"], ALICE)
    stream.until("text")
    stream.close()
    return started


def runs_of(thread_id: str) -> list[Run]:
    return list(Run.objects.filter(thread_id=thread_id).order_by("created_at"))


def wait_until_idle(thread_id: str, runs: int) -> list[Run]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = runs_of(thread_id)
        if len(found) == runs and all(r.is_terminal for r in found):
            return found
        time.sleep(0.05)
    raise AssertionError(f"runs of {thread_id}: {runs_of(thread_id)}")


def first_words(run: Run) -> str:
    return run.messages.filter(role="user").get().text


def test_reject_is_the_default_and_answers_409_run_active(a):
    busy = busy_thread(a)
    refused = a.post(
        "/agent/chat",
        json={"agent": "live", "message": "3", "thread_id": busy["thread_id"]},
        headers=ALICE,
    )
    assert refused.status_code == 409 and refused.json()["code"] == "run_active"
    assert not QueuedMessage.objects.exists()


def test_queued_turns_start_in_order_once_each_and_the_stream_announces_them(a, b):
    busy = busy_thread(a)
    thread_id = busy["thread_id"]
    first = send(b, thread_id, "3", "queue")
    second = send(a, thread_id, "4", "queue")
    assert first.status_code == second.status_code == 202
    assert first.json()["queued"] is True and first.json()["position"] == 1
    assert second.json()["position"] == 2
    listed = a.get(f"/agent/threads/{thread_id}/queue", headers=ALICE).json()
    assert [m["message"] for m in listed] == ["3", "4"]
    assert [m["id"] for m in listed] == [first.json()["message_id"], second.json()["message_id"]]
    assert b.post(f"/agent/chat/{busy['run_id']}/cancel", headers=ALICE).status_code == 202

    frames = read_all(a, busy["run_id"], ALICE)
    kinds = [f.kind for f in frames]
    assert kinds[-4:] == ["cancelled", "next-turn", "finish", "done"]
    announced = frames[-3].data
    assert announced["message_id"] == first.json()["message_id"]
    runs = wait_until_idle(thread_id, 3)
    assert announced["next_run_id"] == runs[1].pk
    assert [first_words(r) for r in runs] == ["slow", "3", "4"]
    statuses = [RunStatus.CANCELLED, RunStatus.COMPLETED, RunStatus.COMPLETED]
    assert [r.status for r in runs] == statuses
    second_frames = read_all(b, runs[1].pk, ALICE)
    assert second_frames[-3].kind == "next-turn"
    assert second_frames[-3].data["next_run_id"] == runs[2].pk
    assert set(QueuedMessage.objects.values_list("status", flat=True)) == {"started"}
    assert a.get(f"/agent/threads/{thread_id}/queue", headers=ALICE).json() == []


def test_a_queued_message_can_be_withdrawn_until_it_starts(a):
    busy = busy_thread(a)
    thread_id = busy["thread_id"]
    queued = send(a, thread_id, "3", "queue").json()
    url = f"/agent/threads/{thread_id}/queue/{queued['message_id']}"
    assert a.delete(url, headers=BOB).status_code == 404  # not Bob's thread to see
    assert a.delete(url, headers=ALICE).status_code == 204
    again = a.delete(url, headers=ALICE)
    assert again.status_code == 409 and again.json()["code"] == "turn_started"
    unknown = a.delete(f"/agent/threads/{thread_id}/queue/qm_nope", headers=ALICE)
    assert unknown.status_code == 404 and unknown.json()["code"] == "not_found"
    a.post(f"/agent/chat/{busy['run_id']}/cancel", headers=ALICE)
    assert [r.status for r in wait_until_idle(thread_id, 1)] == [RunStatus.CANCELLED]


def test_interrupt_cancels_a_running_run_at_its_next_safe_point_then_starts(a, b):
    busy = busy_thread(a)
    thread_id = busy["thread_id"]
    send(a, thread_id, "4", "queue")
    interrupting = send(b, thread_id, "3", "interrupt")
    assert interrupting.status_code == 202
    body = interrupting.json()
    assert body["queued"] is True and body["position"] == 1  # ahead of the queued "4"
    runs = wait_until_idle(thread_id, 3)
    assert [first_words(r) for r in runs] == ["slow", "3", "4"]
    assert [r.status for r in runs] == [
        RunStatus.CANCELLED,
        RunStatus.COMPLETED,
        RunStatus.COMPLETED,
    ]


def test_interrupt_settles_a_parked_run_at_once_and_answers_the_new_run(shop, a):
    parked = start(a, REFUND, ALICE)
    Stream(a, parked["run_id"], ALICE).until("approval-requested")
    interrupting = send(a, parked["thread_id"], "3", "interrupt")
    assert interrupting.status_code == 202
    body = interrupting.json()
    assert body["thread_id"] == parked["thread_id"] and body["run_id"] != parked["run_id"]
    assert Run.objects.get(pk=parked["run_id"]).status == RunStatus.CANCELLED
    assert ToolCall.objects.get(run_id=parked["run_id"]).status == CallStatus.CANCELLED
    assert read_all(a, body["run_id"], ALICE)[-1].event == "done"
    frames = read_all(a, parked["run_id"], ALICE)
    assert frames[-3].kind == "next-turn" and frames[-3].data["next_run_id"] == body["run_id"]


def test_a_bad_mode_is_400_and_starts_nothing(a):
    response = a.post(
        "/agent/chat", json={"agent": "live", "message": "3", "mode": "later"}, headers=ALICE
    )
    assert response.status_code == 400 and response.json()["code"] == "invalid"
    assert not Run.objects.exists()
