"""``useChat`` against Airlock unchanged: the AI SDK's chat transport (POST the messages, read the
UI message stream, answer approvals in the message, resume with GET), over real HTTP against real
daphne, by a client that does what ``useChat`` does (``tests/live/ui_client.py``)."""

from __future__ import annotations

import copy

import pytest
from django.test import Client

from agent_core.choices import CallStatus, RunStatus
from agent_core.models import ChatAlias, Run, ToolCall
from approvals.models import DecisionAttempt
from tests.conftest import REFUND
from tests.live.conftest import ALICE, BOB
from tests.live.ui_client import Chat

SUPPORT = {"agent": "support"}


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_use_chat_client_asks_approves_and_carries_on_in_one_thread(shop, a, b):
    chat = Chat(a, "k3VwZq0sJmWQbH5a", ALICE, body=SUPPORT)
    assert chat.resume() == 204  # a new chat: nothing to resume
    assert chat.send_message(REFUND) is None
    # The answer ends while the run waits on alice: the tool part asks for her approval.
    call = ToolCall.objects.get()
    message = chat.last
    assert message.done and message.finished and message.id == call.run_id
    tool = message.tool(call.pk)
    assert (tool["type"], tool["state"], tool["approval"]) == (
        "tool-issue_refund",
        "approval-requested",
        {"id": call.pk},
    )
    assert ChatAlias.objects.get().thread_id == call.thread_id
    # Another message while it waits: the thread is busy.
    refused = chat.send_message("and another thing")
    assert refused is not None and refused.status_code == 409
    assert refused.json()["code"] == "run_active"
    chat.messages.pop()

    chat.add_tool_approval_response(call.pk, approved=True)
    assert chat.complete_with_approval_responses()
    assert chat.send_automatically() is None
    call.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED and call.decided_via == "ai-sdk"
    assert chat.last is message and message.finished  # the same assistant message, continued
    assert message.tool(call.pk)["state"] == "output-available" and message.text

    # The next user message is the next turn of the same thread.
    assert chat.send_message("hello") is None
    assert Run.objects.filter(thread_id=call.thread_id).count() == 2
    assert Run.objects.filter(status=RunStatus.COMPLETED).count() == 2
    assert len(chat.messages) == 4 and chat.last.finished and chat.last.text

    # Resuming (a reload) on another server replays the waiting run of a new turn, then ends.
    again = Chat(b, chat.id, ALICE)
    chat.send_message(REFUND)
    assert again.resume() == 200
    assert again.last.tool(ToolCall.objects.latest("requested_at").pk)["state"] == (
        "approval-requested"
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_rejection_from_the_chat_is_told_to_the_model_and_others_find_nothing(shop, a):
    chat = Chat(a, "chat_reject-1", ALICE, body=SUPPORT)
    chat.send_message(REFUND)
    call = ToolCall.objects.get()
    # bob's client with alice's chat id: his own (new) chat, without that call: 404.
    stranger = Chat(a, chat.id, BOB, messages=copy.deepcopy(chat.messages))
    stranger.add_tool_approval_response(call.pk, approved=False, reason="no")
    refused = stranger.send_automatically()
    assert refused is not None and refused.status_code == 404
    assert stranger.resume() == 204

    chat.add_tool_approval_response(call.pk, approved=False, reason="not this order")
    assert chat.send_automatically() is None
    call.refresh_from_db()
    assert (call.status, call.reason) == (CallStatus.REJECTED, "not this order")
    assert chat.last.tool(call.pk)["state"] == "output-denied"
    [audit] = DecisionAttempt.objects.filter(action="reject")
    assert (audit.via, audit.outcome) == ("ai-sdk", "applied")


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_bad_requests_answer_json_errors(shop, a):
    url = "/agent/ui-chat"
    user = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
    assert a.post(url, json={"id": "c1", "messages": [user]}).status_code == 401
    regenerate = {"id": "c1", "messages": [user], "trigger": "regenerate-message"}
    assert a.post(url, json=regenerate, headers=ALICE).status_code == 400
    empty = {**user, "parts": [{"type": "file", "url": "x"}]}
    assert (
        a.post(url, json={"id": "c1", "messages": [empty], **SUPPORT}, headers=ALICE).status_code
        == 400
    )
    no_answers = {"id": "c1", "messages": [{"role": "assistant", "parts": []}]}
    assert a.post(url, json=no_answers, headers=ALICE).status_code == 400
    assert a.get("/agent/ui-chat/c1/stream").status_code == 401


@pytest.mark.django_db
def test_the_chat_transport_is_in_the_schema(client: Client):
    paths = client.get("/agent/schema/?format=json").json()["paths"]
    assert "text/event-stream" in paths["/agent/ui-chat"]["post"]["responses"]["200"]["content"]
    assert "204" in paths["/agent/ui-chat/{chat_id}/stream"]["get"]["responses"]
    assert "200" in paths["/agent/chat/{run_id}/ui-stream"]["get"]["responses"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_yes_in_the_chat_decides_the_waiting_call_by_text(shop, a):
    chat = Chat(a, "chat_text-1", ALICE, body=SUPPORT)
    chat.send_message(REFUND)
    call = ToolCall.objects.get()
    assert chat.send_message("yes") is None  # the run goes on, streamed to its end
    call.refresh_from_db()
    assert (call.status, call.decided_via) == (CallStatus.SUCCEEDED, "text")
    assert Run.objects.count() == 1 and chat.last.finished and chat.last.text
