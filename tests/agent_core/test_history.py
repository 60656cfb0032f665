"""Threads over time over REST (SPEC §16): fork, truncate, regenerate, rename.

The no-repeat rule throughout: the refund approved before the fork point, or in the replaced
turn, exists exactly once afterwards (``Refund`` rows are the effect), whatever the model does.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from agent_core.agents import get_agent
from agent_core.choices import CallStatus, Role, RunStatus
from agent_core.engine import transcript
from agent_core.models import Message, Run, Thread, ToolCall
from approvals import services as port
from demo.models import Refund
from tests.approvals.rest import actor, client_for
from tests.conftest import REFUND, calls_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def call_api(django_capture_on_commit_callbacks):
    """``(person, method, url, body)`` → ``(status, JSON)``; the runs it starts are driven."""

    def call(person: User, method: str, url: str, body: dict | None = None) -> tuple[int, Any]:
        with django_capture_on_commit_callbacks(execute=True):
            response = getattr(client_for(person), method)(url, body, format="json")
        return response.status_code, response.json() if response.content else None

    return call


@pytest.fixture
def refunded(turn, decide, people) -> Run:
    """Alice's thread: a refund she approved (it ran), then a second turn."""
    alice = actor(people["alice"])
    run = turn(REFUND, actor=alice)
    [call] = calls_of(run)
    decide(port.approve, call.pk, actor=alice)
    turn("hello", actor=alice, thread_id=run.thread_id)
    assert Refund.objects.count() == 1
    return run


def messages_of(thread_id: str) -> list[Message]:
    return list(Message.objects.filter(thread_id=thread_id).order_by("seq"))


def model_reads(thread_id: str) -> list[tuple[str, list[dict[str, Any]]]]:
    thread = Thread.objects.get(pk=thread_id)
    run = Run(thread=thread, agent=thread.agent)
    request = transcript.build_request(run, get_agent(thread.agent))
    return [(m.role, m.parts) for m in request.messages]


# --- fork ----------------------------------------------------------------------------------------


def test_a_fork_copies_the_ended_calls_and_never_runs_them_again(refunded, people, call_api, turn):
    proposing = messages_of(refunded.thread_id)[1]  # the assistant message with the refund
    url = f"/agent/threads/{refunded.thread_id}/fork"
    status, body = call_api(people["alice"], "post", url, {"message_id": proposing.pk})
    assert status == 201
    assert body["forked_from"] == {"thread_id": refunded.thread_id, "message_id": proposing.pk}
    assert body["owner_ref"] == actor(people["alice"]).ref and body["id"] != refunded.thread_id
    [copy] = ToolCall.objects.filter(thread_id=body["id"])
    [original] = calls_of(refunded)
    assert copy.pk != original.pk and copy.status == CallStatus.SUCCEEDED
    assert (copy.result, copy.decided_by_ref) == (original.result, original.decided_by_ref)
    # The copied call's result comes after the fork point: the fork carries it, so the model
    # reads a result for every call it proposed.
    roles = [role for role, _ in model_reads(body["id"])]
    assert roles == [Role.USER, Role.ASSISTANT, Role.TOOL]
    [result] = model_reads(body["id"])[2][1]
    assert result["tool_call_id"] == copy.pk and not result["is_error"]
    # The next turn on the fork is a new turn; the refund ran once, ever.
    run = turn("hello", actor=actor(people["alice"]), thread_id=body["id"])
    assert run.status == RunStatus.COMPLETED
    assert Refund.objects.count() == 1


def test_a_fork_leaves_out_a_call_still_pending(turn, decide, people, call_api):
    alice = actor(people["alice"])
    run = turn(REFUND, actor=alice)
    assert run.status == RunStatus.WAITING  # the source's run is active: a fork may still be
    proposing = messages_of(run.thread_id)[1]
    url = f"/agent/threads/{run.thread_id}/fork"
    status, body = call_api(people["alice"], "post", url, {"message_id": proposing.pk})
    assert status == 201
    assert not ToolCall.objects.filter(thread_id=body["id"]).exists()
    assert [role for role, _ in model_reads(body["id"])] == [Role.USER]
    [call] = calls_of(run)
    decide(port.approve, call.pk, actor=alice)
    assert Refund.objects.count() == 1


def test_a_fork_is_refused_as_unknown_to_a_stranger_and_for_a_foreign_message(
    refunded, people, call_api, turn
):
    said = messages_of(refunded.thread_id)[0]
    url = f"/agent/threads/{refunded.thread_id}/fork"
    status, body = call_api(people["bob"], "post", url, {"message_id": said.pk})
    assert (status, body["code"]) == (404, "not_found")
    other = turn("hello", actor=actor(people["bob"]))
    foreign = messages_of(other.thread_id)[0]
    status, body = call_api(people["alice"], "post", url, {"message_id": foreign.pk})
    assert (status, body["code"]) == (404, "not_found")
    status, body = call_api(people["alice"], "post", url, {})
    assert (status, body["code"]) == (400, "invalid")
    assert Thread.objects.count() == 2


def test_an_operator_may_fork_a_thread_it_sees_and_owns_the_fork(refunded, people, call_api):
    said = messages_of(refunded.thread_id)[0]
    url = f"/agent/threads/{refunded.thread_id}/fork"
    status, body = call_api(people["otto"], "post", url, {"message_id": said.pk})
    assert status == 201 and body["owner_ref"] == actor(people["otto"]).ref


# --- truncate ------------------------------------------------------------------------------------


def test_truncate_drops_from_a_message_and_keeps_the_records(refunded, people, call_api):
    messages = messages_of(refunded.thread_id)
    second_turn = next(m for m in messages[1:] if m.role == Role.USER)
    url = f"/agent/threads/{refunded.thread_id}/messages?from={second_turn.pk}"
    status, body = call_api(people["alice"], "delete", url)
    assert (status, body) == (200, {"dropped": 2})
    assert [role for role, _ in model_reads(refunded.thread_id)] == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
    ]
    dropped_run = Run.objects.get(pk=second_turn.run_id)
    assert dropped_run.dropped_at is not None and refunded.dropped_at is None
    assert Message.objects.filter(thread_id=refunded.thread_id).count() == len(messages)
    # Dropping the refund's turn keeps its call, its effect and its audit row.
    status, _ = call_api(people["alice"], "delete", url.replace(second_turn.pk, messages[0].pk))
    assert status == 200 and model_reads(refunded.thread_id) == []
    assert ToolCall.objects.get(run=refunded).status == CallStatus.SUCCEEDED
    assert Refund.objects.count() == 1
    status, body = call_api(people["alice"], "get", f"/agent/threads/{refunded.thread_id}")
    assert all(m["dropped_at"] for m in body["messages"])


def test_truncating_the_results_of_calls_gives_the_model_their_results_again(
    refunded, people, call_api
):
    results = messages_of(refunded.thread_id)[2]
    assert results.role == Role.TOOL
    url = f"/agent/threads/{refunded.thread_id}/messages?from={results.pk}"
    assert call_api(people["alice"], "delete", url)[0] == 200
    reads = model_reads(refunded.thread_id)
    assert [role for role, _ in reads] == [Role.USER, Role.ASSISTANT, Role.TOOL]
    assert reads[2][1] == results.content  # the same results, in a message of their own
    assert Refund.objects.count() == 1


def test_truncate_refusals(refunded, people, call_api, turn):
    first = messages_of(refunded.thread_id)[0]
    url = f"/agent/threads/{refunded.thread_id}/messages?from={first.pk}"
    assert call_api(people["bob"], "delete", url)[1]["code"] == "not_found"
    assert call_api(people["fran"], "delete", url)[0] == 404
    status, body = call_api(people["alice"], "delete", url.split("?")[0])
    assert (status, body["code"]) == (400, "invalid")
    status, body = call_api(people["alice"], "delete", url.replace(first.pk, "J%00"))
    assert (status, body["code"]) == (400, "invalid")
    status, body = call_api(people["alice"], "delete", url.replace(first.pk, "msg_nope"))
    assert (status, body["code"]) == (404, "not_found")
    waiting = turn(REFUND, actor=actor(people["alice"]), thread_id=refunded.thread_id)
    assert waiting.status == RunStatus.WAITING
    status, body = call_api(people["alice"], "delete", url)
    assert (status, body["code"]) == (409, "run_active")
    assert not Message.objects.filter(dropped_at__isnull=False).exists()


# --- regenerate ----------------------------------------------------------------------------------


def test_regenerate_answers_again_and_a_call_made_again_asks_again(turn, decide, people, call_api):
    alice = actor(people["alice"])
    run = turn(REFUND, actor=alice)
    [call] = calls_of(run)
    decide(port.approve, call.pk, actor=alice)
    body = {"thread_id": run.thread_id, "regenerate": True}
    status, started = call_api(people["alice"], "post", "/agent/chat", body)
    assert status == 202 and started["thread_id"] == run.thread_id
    again = Run.objects.get(pk=started["run_id"])
    # The scripted model calls the refund again: a new call, waiting for its own approval.
    assert again.status == RunStatus.WAITING
    [new_call] = calls_of(again)
    assert new_call.pk != call.pk and new_call.status == CallStatus.PENDING_APPROVAL
    assert Refund.objects.count() == 1
    run.refresh_from_db()
    assert run.dropped_at is not None
    assert [role for role, _ in model_reads(run.thread_id)] == [Role.USER, Role.ASSISTANT]
    # Rejected, it never runs: the one refund stays the replaced turn's.
    decide(port.reject, new_call.pk, actor=alice)
    assert Refund.objects.count() == 1


def test_regenerate_refusals(turn, people, call_api):
    run = turn(REFUND, actor=actor(people["alice"]))
    body = {"thread_id": run.thread_id, "regenerate": True}
    status, answer = call_api(people["alice"], "post", "/agent/chat", body)
    assert (status, answer["code"]) == (409, "run_active")
    assert call_api(people["bob"], "post", "/agent/chat", body)[0] == 404
    with_message = {**body, "message": "hello"}
    assert call_api(people["alice"], "post", "/agent/chat", with_message)[0] == 400
    no_thread = {"regenerate": True}
    assert call_api(people["alice"], "post", "/agent/chat", no_thread)[0] == 400
    assert call_api(people["alice"], "post", "/agent/chat", {"message": "hi"})[0] == 400
    assert Run.objects.count() == 1


# --- rename --------------------------------------------------------------------------------------


def test_rename(turn, people, call_api):
    run = turn("hello", actor=actor(people["alice"]))
    url = f"/agent/threads/{run.thread_id}"
    status, body = call_api(people["alice"], "patch", url, {"title": "Refund for Maria"})
    assert (status, body["title"]) == (200, "Refund for Maria")
    status, listed = call_api(people["alice"], "get", "/agent/threads")
    assert [t["title"] for t in listed["results"]] == ["Refund for Maria"]
    assert call_api(people["bob"], "patch", url, {"title": "mine"})[0] == 404
    assert call_api(people["otto"], "patch", url, {"title": "ops"})[0] == 403
    assert call_api(people["alice"], "patch", url, {"title": ""})[0] == 400
    assert call_api(people["alice"], "put", url, {"title": "x"})[0] == 405
    assert Thread.objects.get().title == "Refund for Maria"
