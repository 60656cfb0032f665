"""``manage.py agent …`` in real subprocesses (and a pty for ``chat``) against the test database."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from agent_core.actors import actor_for_user
from agent_core.choices import CallStatus, RunStatus
from agent_core.engine import runs
from agent_core.models import IdempotencyKey, Run, StreamFrame, Thread, ToolCall
from approvals.models import DecisionAttempt, RememberedApproval
from demo.models import CachePurge, FollowUp, Refund
from tests.conftest import leave_in_doubt
from tests.processes import Terminal, manage

# ``people`` (alice, bob, ...) start turns here in this process (``waiting``), on the demo's shop.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("shop", "sync_runner"),
]

WAITING = 3
QUOTA_EXCEEDED = 4


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    opened: list[Terminal] = []
    yield opened
    for terminal in opened:
        terminal.kill()


def open_chat(terminals: list[Terminal], *args: str) -> Terminal:
    terminal = Terminal("agent", "chat", "support", "--as", "alice", *args)
    terminals.append(terminal)
    return terminal


def waiting(message: str) -> tuple[str, str]:
    """Start, in this process, a turn of alice's that stops on a person: (call id, thread id)."""
    alice = actor_for_user(User.objects.get(username="alice"))
    run = runs.start_run(agent="support", message=message, actor=alice)
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING
    return ToolCall.objects.get(run=run).pk, run.thread_id


def invoke_waiting(message: str) -> tuple[str, str]:
    """Invoke a turn that stops on a person; the pending call's id and the thread's."""
    result = manage("agent", "invoke", "support", message, "--as", "alice")
    assert result.returncode == WAITING, result.stderr
    head, line = result.stdout.splitlines()[:2]
    call_id = line.split("\t")[0]
    assert call_id.startswith("tc_") and head.startswith("waiting on a person: thread thr_")
    return call_id, head.split()[5]


# --- invoke, pending, approve, reject, answer ----------------------------------------------------


def test_invoke_exits_3_with_the_pending_call_then_approve_resumes_it(people):
    result = manage(
        "agent", "invoke", "support", '/call purge_cache {"path": "/p"}', "--as", "alice"
    )
    assert result.returncode == WAITING, result.stderr
    call = ToolCall.objects.get()
    assert result.stdout.splitlines()[1] == (
        f'{call.pk}\tpurge_cache\t{{"path": "/p"}}\tapprover=requester'
    )
    pending = manage("agent", "pending", "--as", "alice")
    assert call.pk in pending.stdout and "purge_cache" in pending.stdout
    assert manage("agent", "pending", "--as", "bob").stdout.strip() == "nothing is waiting"

    approved = manage("agent", "approve", call.pk, "--as", "alice", "--remember")
    assert approved.returncode == 0, approved.stderr
    assert approved.stdout.strip() == f"{call.pk}: applied"
    call.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED and call.decided_via == "cli" and call.remember
    assert CachePurge.objects.count() == 1
    assert Run.objects.get().status == RunStatus.COMPLETED

    again = manage("agent", "approve", call.pk, "--as", "alice")
    assert again.returncode == 0 and again.stdout.strip() == f"{call.pk}: unchanged"
    late = manage("agent", "reject", call.pk, "--as", "alice", "--reason", "changed my mind")
    assert late.returncode == 1 and "already_decided" in late.stderr
    assert CachePurge.objects.count() == 1
    assert set(DecisionAttempt.objects.values_list("via", flat=True)) == {"cli"}


def test_reject_tells_the_model_why(people):
    call_id, _ = waiting('/call issue_refund {"order_id": "A-1001", "amount": 30}')
    result = manage("agent", "reject", call_id, "--as", "alice", "--reason", "not eligible")
    assert result.returncode == 0, result.stderr
    call = ToolCall.objects.get(pk=call_id)
    assert call.status == CallStatus.REJECTED and call.reason == "not eligible"
    assert call.decided_via == "cli" and Refund.objects.count() == 0


def test_approve_with_edited_args(people):
    call_id, _ = waiting('/call issue_refund {"order_id": "A-1001", "amount": 30}')
    result = manage(
        "agent",
        "approve",
        call_id,
        "--as",
        "alice",
        "--args",
        '{"order_id": "A-1001", "amount": 5}',
    )
    assert result.returncode == 0, result.stderr
    assert str(Refund.objects.get().amount) == "5.00"
    invalid = manage("agent", "approve", call_id, "--as", "alice", "--args", "[1]")
    assert invalid.returncode == 1 and "must be a JSON object" in invalid.stderr


def test_refusals_exit_1_and_change_nothing(people):
    call_id, _ = waiting('/call purge_cache {"path": "/p"}')
    not_mine = manage("agent", "approve", call_id, "--as", "bob")
    assert not_mine.returncode == 1 and "not_found" in not_mine.stderr  # not bob's to see
    nobody = manage("agent", "approve", call_id, "--as", "mallory")
    assert nobody.returncode == 1 and "no user called 'mallory'" in nobody.stderr
    unknown = manage("agent", "approve", "tc_nope", "--as", "alice")
    assert unknown.returncode == 1 and "not_found" in unknown.stderr
    no_reason = manage("agent", "reject", call_id, "--as", "alice")
    assert no_reason.returncode == 2 and "--reason" in no_reason.stderr
    assert ToolCall.objects.get(pk=call_id).status == CallStatus.PENDING_APPROVAL
    assert CachePurge.objects.count() == 0


def test_a_question_is_answered_from_the_command_line(people):
    call_id, thread_id = invoke_waiting('/call ask_user {"question": "Which size?"}')
    assert "\tanswer" in manage("agent", "pending", "--as", "alice").stdout
    result = manage("agent", "answer", call_id, "Large", "--as", "alice")
    assert result.returncode == 0, result.stderr
    assert ToolCall.objects.get(pk=call_id).result == {"answer": "Large"}
    follow_up = manage("agent", "invoke", "support", "hi", "--as", "alice", "--thread", thread_id)
    assert follow_up.returncode == 0 and "look up orders" in follow_up.stdout


def test_invoke_on_a_busy_thread_is_refused(people):
    _, thread_id = waiting('/call purge_cache {"path": "/p"}')
    busy = manage("agent", "invoke", "support", "hi", "--as", "alice", "--thread", thread_id)
    assert busy.returncode == 1 and "run_active" in busy.stderr
    theirs = manage("agent", "invoke", "support", "hi", "--as", "bob", "--thread", thread_id)
    assert theirs.returncode == 1 and f"no thread {thread_id} of yours" in theirs.stderr
    unknown = manage("agent", "invoke", "nobody", "hi", "--as", "alice")
    assert unknown.returncode == 1 and "agent_not_found" in unknown.stderr


def test_invoke_over_a_quota_exits_4(people):
    budget = {"AIRLOCK_TEST_QUOTAS": json.dumps({"TOKENS_PER_DAY": 5})}
    lookup = '/call lookup_order {"order_id": "A-1001"}'
    stopped = manage("agent", "invoke", "support", lookup, "--as", "alice", **budget)
    assert stopped.returncode == QUOTA_EXCEEDED, stopped.stderr
    assert "failed: quota_exceeded" in stopped.stderr
    refused = manage("agent", "invoke", "support", "hi", "--as", "alice", **budget)
    assert refused.returncode == QUOTA_EXCEEDED and "quota_exceeded:" in refused.stderr
    assert Run.objects.count() == 1


# --- cleanup -------------------------------------------------------------------------------------


def _age(thread_id: str, days: int) -> None:
    then = timezone.now() - timedelta(days=days)
    Thread.objects.filter(pk=thread_id).update(created_at=then)
    Run.objects.filter(thread_id=thread_id).update(created_at=then)
    Run.objects.filter(thread_id=thread_id, finished_at__isnull=False).update(finished_at=then)


def test_cleanup_deletes_old_finished_threads_only(people):
    alice = actor_for_user(people["alice"])
    old_done = runs.start_run(agent="support", message="hello", actor=alice).thread_id
    _, old_waiting = waiting('/call purge_cache {"path": "/p"}')
    runs.start_run(agent="support", message="hello", actor=alice)
    recent = Thread.objects.exclude(pk__in=[old_done, old_waiting]).get().pk
    _age(old_done, 40)
    _age(old_waiting, 40)

    soon = timezone.now() + timedelta(hours=1)
    IdempotencyKey.objects.create(
        actor_ref="user:alice", key="old", response={}, expires_at=timezone.now()
    )
    IdempotencyKey.objects.create(actor_ref="user:alice", key="live", response={}, expires_at=soon)
    dry = manage("agent", "cleanup", "--older-than", "30d", "--dry-run")
    assert dry.stdout.strip() == "1 finished threads are older than 30d"
    result = manage("agent", "cleanup", "--older-than", "30d")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("deleted 1 threads (")
    assert result.stdout.splitlines()[-1] == "deleted 1 expired idempotency keys"
    assert list(IdempotencyKey.objects.values_list("key", flat=True)) == ["live"]
    assert set(Thread.objects.values_list("pk", flat=True)) == {old_waiting, recent}
    assert not Run.objects.filter(thread_id=old_done).exists()
    assert not StreamFrame.objects.filter(run__thread_id=old_done).exists()
    bad = manage("agent", "cleanup", "--older-than", "soon")
    assert bad.returncode == 1 and "not an age like 30d" in bad.stderr


# --- chat ----------------------------------------------------------------------------------------


def test_chat_streams_asks_and_decides(people, terminals):
    chat = open_chat(terminals)
    chat.expect("you> ")
    chat.send("hello")
    assert "look up orders" in chat.expect("you> ")

    chat.send('/call purge_cache {"path": "/products"}')
    card = chat.expect("approve [remember] / reject <reason> / edit <json> > ")
    assert '[approval needed] purge_cache {"path": "/products"}' in card
    chat.send("maybe")
    chat.expect("type approve (or approve remember), reject <reason> or edit <json args>")
    chat.send("approve")
    answer = chat.expect("you> ")
    assert "approved by user:" in answer and "via cli" in answer
    assert "purge_cache returned" in answer

    chat.send('/call issue_refund {"order_id": "A-1001", "amount": 30}')
    chat.expect("edit <json> > ")
    chat.send('edit {"order_id": "A-1001", "amount": "lots"}')
    chat.expect("refused (invalid)")
    chat.send('edit {"order_id": "A-1001", "amount": 12}')
    assert "issue_refund returned" in chat.expect("you> ")
    assert str(Refund.objects.get().amount) == "12.00"

    chat.send('/call purge_cache {"path": "/"}')
    chat.expect("edit <json> > ")
    chat.send("reject too broad")
    assert "too broad" in chat.expect("you> ")

    chat.send('/call ask_user {"question": "Which size?"}')
    assert "? Which size?" in chat.expect("answer> ")
    chat.send("Large")
    assert 'ask_user returned {"answer": "Large"}' in chat.expect("you> ")

    chat.end_input()
    assert chat.wait() == 0
    assert CachePurge.objects.count() == 1
    vias = set(ToolCall.objects.exclude(decided_via="").values_list("decided_via", flat=True))
    assert vias == {"cli"}


def test_chat_reattaches_to_a_thread_left_waiting(people, terminals):
    first = open_chat(terminals)
    first.expect("you> ")
    first.send('/call purge_cache {"path": "/products"}')
    first.expect("edit <json> > ")
    first.end_input()  # the person walks away from the card
    assert "reattach with --thread thr_" in first.expect("\n") + first.expect("\n")
    assert first.wait() == 0
    run = Run.objects.get()
    assert run.status == RunStatus.WAITING and CachePurge.objects.count() == 0

    second = open_chat(terminals, "--thread", run.thread_id)
    shown = second.expect("edit <json> > ")
    assert f"thread {run.thread_id}" in shown and "/call purge_cache" in shown
    assert "[approval needed] purge_cache" in shown
    second.send("approve remember")
    assert "purge_cache returned" in second.expect("you> ")
    second.send('/call purge_cache {"path": "/cart"}')
    assert "approved by user:" in second.expect("you> ")  # remembered: no card this time
    second.end_input()
    assert second.wait() == 0
    assert CachePurge.objects.count() == 2
    assert ToolCall.objects.filter(decided_via="remembered").count() == 1
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED


def test_chat_regenerates_forks_and_truncates(people, terminals):
    chat = open_chat(terminals)
    chat.expect("you> ")
    chat.send("/regenerate")
    assert "no thread yet" in chat.expect("you> ")
    chat.send('/call issue_refund {"order_id": "A-1001", "amount": 12}')
    chat.expect("edit <json> > ")
    chat.send("approve")
    chat.expect("you> ")
    # Regenerated, the model asks for the refund again: a new card, never the old effect.
    chat.send("/regenerate")
    chat.expect("edit <json> > ")
    chat.send("reject once is enough")
    chat.expect("you> ")
    thread = Thread.objects.get()
    chat.send("/fork 1")
    assert "forked: now on thread thr_" in chat.expect("you> ")
    chat.send("/truncate 9")
    assert "has no message number 9" in chat.expect("you> ")
    chat.send("/truncate 1")
    assert "dropped 1 messages" in chat.expect("you> ")
    chat.send("/fork")
    assert "usage: /regenerate" in chat.expect("you> ")
    chat.end_input()
    assert chat.wait() == 0
    assert Refund.objects.count() == 1
    fork = Thread.objects.exclude(pk=thread.pk).get()
    assert fork.forked_from_thread_id == thread.pk
    statuses = sorted(ToolCall.objects.filter(thread=thread).values_list("status", flat=True))
    assert statuses == [CallStatus.REJECTED, CallStatus.SUCCEEDED]


def test_chat_waits_for_an_approver_it_is_not(people, terminals, settings):
    # A call whose approver is a role alice lacks: chat shows the card and waits; bob (with the
    # role) decides from another process, and the chat carries on.
    call_id, thread_id = waiting('/call purge_cache {"path": "/p"}')
    ToolCall.objects.filter(pk=call_id).update(approver="ops")
    bob = User.objects.get(username="bob")
    bob.groups.create(name="ops")

    chat = open_chat(terminals, "--thread", thread_id)
    chat.expect("waiting for ops to decide")
    result = manage("agent", "approve", call_id, "--as", "bob")
    assert result.returncode == 0, result.stderr
    assert "purge_cache returned" in chat.expect("you> ")
    chat.end_input()
    assert chat.wait() == 0
    assert json.loads(json.dumps(ToolCall.objects.get(pk=call_id).result))["purged"] == "/p"


def test_mark_done_and_not_done_resolve_a_call_in_doubt(people):
    alice = actor_for_user(User.objects.get(username="alice"))
    done_id, _ = waiting('/call purge_cache {"path": "/done"}')
    leave_in_doubt(done_id, alice)
    refused = manage("agent", "mark-done", done_id, "--as", "bob")  # bob may not see it: unknown
    assert refused.returncode == 1 and "not_found" in refused.stderr
    bad = manage("agent", "mark-done", done_id, "--as", "alice", "--result", "{oops")
    assert bad.returncode == 1 and "--result is not JSON" in bad.stderr
    result = manage("agent", "mark-done", done_id, "--as", "alice", "--result", '{"ok": true}')
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{done_id}: applied"
    done = ToolCall.objects.get(pk=done_id)
    assert done.status == CallStatus.SUCCEEDED and done.result == {"ok": True}
    assert CachePurge.objects.count() == 0

    again_id, _ = waiting('/call purge_cache {"path": "/again"}')
    leave_in_doubt(again_id, alice)
    result = manage("agent", "mark-not-done", again_id, "--as", "alice")
    assert result.returncode == 0, result.stderr
    assert CachePurge.objects.get().path == "/again"
    attempts = DecisionAttempt.objects.filter(action__in=["mark_done", "mark_not_done"])
    assert set(attempts.values_list("via", flat=True)) == {"cli"}
    assert sorted(attempts.values_list("outcome", flat=True)) == [
        "applied",
        "applied",
        "not_found",
    ]


def test_chat_shows_and_decides_a_child_runs_card(people, terminals):
    chat = open_chat(terminals)
    chat.expect("you> ")
    refund = '/call issue_refund {"order_id": "A-1001", "amount": 30}'
    chat.send(f"/call ask_billing {json.dumps({'message': refund})}")
    card = chat.expect("edit <json> > ")
    assert "=> billing (run_" in card and "[approval needed] issue_refund" in card
    assert "asked by: support → billing" in card
    chat.send("approve")
    answer = chat.expect("you> ")
    assert "ask_billing returned" in answer and "issue_refund returned" in answer
    assert Refund.objects.count() == 1
    assert Run.objects.filter(agent="billing", status=RunStatus.COMPLETED).count() == 1
    chat.end_input()
    assert chat.wait() == 0


def test_approve_remembers_within_pins_and_uses(people):
    call_id, thread_id = waiting('/call purge_cache {"path": "/products/shoes"}')
    wider = manage("agent", "approve", call_id, "--as", "alice", "--pin", "path=/checkout/*")
    assert wider.returncode == 1 and "grant_wider_than_call" in wider.stderr
    approved = manage(
        "agent", "approve", call_id, "--as", "alice", "--pin", "path=/products/*", "--uses", "2"
    )
    assert approved.returncode == 0, approved.stderr
    grant = RememberedApproval.objects.get()
    assert (grant.thread_id, grant.arg_pins, grant.uses_left) == (
        thread_id,
        {"path": "/products/*"},
        2,
    )


def test_chat_decides_a_proposal_by_text(people, terminals):
    chat = open_chat(terminals)
    chat.expect("you> ")
    chat.send('/call schedule_follow_up {"order_id": "A-1001", "send_on": "2026-12-24"}')
    assert '"status": "pending"' in chat.expect("you> ")  # the turn ended; the proposal waits
    chat.send("yes?")  # a question: a message for the model
    chat.expect("you> ")
    assert not FollowUp.objects.exists()
    chat.send("yes")
    assert "schedule_follow_up #" in chat.expect("you> ")
    chat.end_input()
    assert chat.wait() == 0
    proposal = ToolCall.objects.get(tool_name="schedule_follow_up", run__kind="proposal")
    assert (proposal.status, proposal.decided_via) == ("succeeded", "text")
    assert FollowUp.objects.get().tool_call_id == proposal.pk
