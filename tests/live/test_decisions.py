"""The decision endpoints over real HTTP: a decision made on one server resumes a run that the
other drives, and every refusal answers its status and code."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from django.utils import timezone

from agent_core.choices import CallStatus
from agent_core.models import ToolCall
from tests.conftest import REFUND
from tests.live.conftest import ALICE, BOB, Stream, read_all, start

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ASK = '/call ask_user {"question": "Which order?"}'


def _pending(client: httpx.Client, message: str) -> tuple[str, str]:
    """Start a turn on ``client``'s server and return (run id, call id) once it waits."""
    started = start(client, message, ALICE)
    stream = Stream(client, started["run_id"], ALICE)
    stream.until("step-finish")
    stream.close()
    call = ToolCall.objects.get(run_id=started["run_id"])
    return started["run_id"], call.pk


def _post(client: httpx.Client, path: str, body: dict, actor=ALICE) -> tuple[int, dict]:
    response = client.post(f"/agent/tool-call/{path}", json=body, headers=actor)
    return response.status_code, response.json()


def test_reject_on_one_server_resumes_the_run_on_the_other(shop, a, b):
    run_id, call_id = _pending(a, REFUND)
    listed = b.get("/agent/approvals/pending", headers=ALICE).json()
    assert [c["tool_call_id"] for c in listed["results"]] == [call_id]
    assert _post(b, "reject", {"tool_call_id": call_id}, BOB)[0] == 404  # not bob's to see
    status, body = _post(b, "reject", {"tool_call_id": call_id, "reason": "too much"})
    assert (status, body["outcome"]) == (200, "applied")
    assert _post(b, "reject", {"tool_call_id": call_id, "reason": "too much"})[1]["outcome"] == (
        "unchanged"
    )
    status, body = _post(a, "approve", {"tool_call_id": call_id})
    assert (status, body["code"]) == (409, "already_decided")
    assert read_all(a, run_id, ALICE)[-1].event == "done"
    assert ToolCall.objects.get(pk=call_id).status == CallStatus.REJECTED
    assert _post(a, "approve", {"tool_call_id": "tc_nope"})[0] == 404


def test_answers_are_validated_and_given_once(shop, a, b):
    run_id, call_id = _pending(a, ASK)
    status, body = _post(b, "answer", {"tool_call_id": call_id, "answer": {"answer": ""}})
    assert (status, body["code"]) == (400, "invalid") and body["errors"]
    assert _post(b, "answer", {"tool_call_id": call_id, "answer": {"answer": "A-1001"}})[0] == 200
    status, body = _post(b, "answer", {"tool_call_id": call_id, "answer": {"answer": "A-1002"}})
    assert (status, body["code"]) == (409, "already_answered")
    assert read_all(a, run_id, ALICE)[-1].event == "done"


def test_a_late_decision_is_gone(shop, a, b):
    run_id, call_id = _pending(a, REFUND)
    ToolCall.objects.filter(pk=call_id).update(expires_at=timezone.now() - timedelta(seconds=1))
    status, body = _post(b, "approve", {"tool_call_id": call_id})
    assert (status, body["code"]) == (410, "approval_expired")
    frames = read_all(a, run_id, ALICE)
    denied = [f for f in frames if f.kind == "tool-output-denied"]
    assert denied[0].data["reason"] == "approval expired" and frames[-1].event == "done"
