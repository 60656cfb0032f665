"""Text decisions (SPEC §17): a whole chat message that is a decision word decides the thread's
pending call through the port (``decided_via: "text"``), with no model call; near misses never
consent."""

from __future__ import annotations

import pytest
from django.test import override_settings

from agent_core.choices import CallStatus, RunStatus
from agent_core.models import Run, Step, ToolCall
from approvals.models import DecisionAttempt, RememberedApproval
from approvals.text_decisions import Parsed, Verb, parse, short_id
from demo.models import FollowUp
from tests.approvals.rest import actor, client_for
from tests.approvals.test_independent import follow_up, proposal_of
from tests.conftest import calls_of

pytestmark = pytest.mark.django_db

DECISIONS = [
    ("yes", Parsed(Verb.APPROVE)),
    ("Yes", Parsed(Verb.APPROVE)),
    ("  YES!  ", Parsed(Verb.APPROVE)),
    ("approve.", Parsed(Verb.APPROVE)),
    ("confirm", Parsed(Verb.APPROVE)),
    ("no", Parsed(Verb.REJECT)),
    ("reject", Parsed(Verb.REJECT)),
    ("cancel", Parsed(Verb.REJECT)),
    ("yes #tc_01ABCDEF", Parsed(Verb.APPROVE, "tc_01abcdef")),
    ("no #x7k2q9", Parsed(Verb.REJECT, "x7k2q9")),
    ("approve always #x7k2q9", Parsed(Verb.ALWAYS, "x7k2q9")),
    ("approve   always", Parsed(Verb.ALWAYS)),
]

NEAR_MISSES = [
    "yes?",  # a question
    "no?",
    "approve?",
    '"yes"',  # quoted
    "'yes'",
    "> yes",
    "«yes»",
    "yes, but only half",  # longer
    "yes please",
    "yes yes",
    "no way",
    "no, wait",
    "I approve",
    "approve it",
    "yesterday",  # a word that starts like one
    "nothing",
    "confirmed",
    "yes #",  # an empty reference
    "yes #id #id",
    "yes #a b",
    "ja",  # another language, not configured here
    "",
    "approve always always",
    "yes\nand refund the rest too",
]


@pytest.mark.parametrize(("text", "parsed"), DECISIONS)
def test_whole_decision_messages_decide(text, parsed):
    assert parse(text) == parsed


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_near_misses_never_consent(text):
    assert parse(text) is None


@override_settings(
    APPROVALS={"TEXT_DECISIONS": {"de": {"approve": ["ja"], "always": ["ja immer"]}}}
)
def test_the_word_lists_come_from_settings():
    assert parse("Ja") == Parsed(Verb.APPROVE)
    assert parse("ja immer #abc123") == Parsed(Verb.ALWAYS, "abc123")
    assert parse("yes") is None


def _say(person, thread_id: str, message: str, capture) -> tuple[int, dict]:
    with capture(execute=True):
        response = client_for(person).post(
            "/agent/chat",
            {"agent": "support", "thread_id": thread_id, "message": message},
            format="json",
        )
    return response.status_code, response.json()


def test_yes_in_the_rest_chat_approves_the_waiting_call_without_a_turn(
    turn, people, django_capture_on_commit_callbacks
):
    alice = people["alice"]
    run = turn('/call purge_cache {"path": "/a"}', actor=actor(alice))
    [call] = calls_of(run)
    status, data = _say(alice, run.thread_id, "yes?", django_capture_on_commit_callbacks)
    assert (status, data["code"]) == (409, "run_active")  # a question: a message, refused
    steps = Step.objects.filter(run=run, name__startswith="llm:").count()
    status, data = _say(alice, run.thread_id, "Yes", django_capture_on_commit_callbacks)
    assert status == 202 and data["decided"] is True
    assert (data["tool_call_id"], data["outcome"], data["run_id"]) == (call.pk, "applied", run.pk)
    assert data["stream_url"].endswith(f"/{run.pk}/stream")
    call.refresh_from_db()
    assert (call.status, call.decided_via) == (CallStatus.SUCCEEDED, "text")
    assert Run.objects.filter(thread_id=run.thread_id).count() == 1  # no turn started
    # The decision called no model: the run's one more model step is its own continuation.
    assert Step.objects.filter(run=run, name__startswith="llm:").count() == steps + 1
    [audit] = DecisionAttempt.objects.filter(tool_call_id=call.pk, action="approve")
    assert (audit.via, audit.outcome) == ("text", "applied")


def test_no_rejects_and_a_stranger_cannot_decide_by_text(
    turn, people, django_capture_on_commit_callbacks
):
    alice, bob = people["alice"], people["bob"]
    run = turn('/call purge_cache {"path": "/a"}', actor=actor(alice))
    [call] = calls_of(run)
    assert _say(bob, run.thread_id, "yes", django_capture_on_commit_callbacks)[0] == 404
    status, data = _say(alice, run.thread_id, "no", django_capture_on_commit_callbacks)
    assert status == 202 and data["status"] == "rejected"
    assert ToolCall.objects.get(pk=call.pk).status == CallStatus.REJECTED


def test_several_pending_and_no_id_lists_them_and_an_id_decides_one(
    turn, people, django_capture_on_commit_callbacks
):
    alice = people["alice"]
    run = turn(follow_up("A-1001"), actor=actor(alice))
    first = proposal_of(run)
    second = proposal_of(turn(follow_up("A-1002"), actor=actor(alice), thread_id=run.thread_id))
    say = django_capture_on_commit_callbacks
    status, data = _say(alice, run.thread_id, "yes", say)
    assert status == 202 and data["decided"] is False and not data["run_id"]
    assert f"#{short_id(first.pk)}" in data["reply"] and f"#{short_id(second.pk)}" in data["reply"]
    assert ToolCall.objects.filter(status=CallStatus.PENDING_APPROVAL).count() == 2
    assert Run.objects.filter(thread_id=run.thread_id).count() == 4  # no turn started
    status, data = _say(alice, run.thread_id, "yes #zzzzzz", say)
    assert data["decided"] is False and "No pending call #zzzzzz" in data["reply"]
    message = f"approve always #{short_id(second.pk)}"
    status, data = _say(alice, run.thread_id, message, say)
    assert (status, data["tool_call_id"], data["run_id"]) == (202, second.pk, second.run_id)
    second.refresh_from_db()
    assert (second.status, second.decided_via, second.remember) == (
        CallStatus.SUCCEEDED,
        "text",
        True,
    )
    assert RememberedApproval.objects.get().source_tool_call_id == second.pk
    assert [f.order_id for f in FollowUp.objects.all()] == ["A-1002"]
    status, data = _say(alice, run.thread_id, f"no #{first.pk}", say)
    assert ToolCall.objects.get(pk=first.pk).status == CallStatus.REJECTED


def test_a_decision_word_with_nothing_pending_is_a_message_for_the_model(
    turn, people, django_capture_on_commit_callbacks
):
    alice = people["alice"]
    run = turn("hello", actor=actor(alice))
    status, data = _say(alice, run.thread_id, "yes", django_capture_on_commit_callbacks)
    assert status == 202 and data["run_id"] != run.pk and "decided" not in data
    assert Run.objects.get(pk=data["run_id"]).status == RunStatus.COMPLETED
