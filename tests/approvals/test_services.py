"""The approval port: outcomes, refusals (each audited) and races, through the real loop."""

from __future__ import annotations

import ast
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from agent_core.choices import CallStatus, RunStatus
from agent_core.engine import runs
from agent_core.engine.dispatch import set_runner
from agent_core.exceptions import AlreadyAnswered, AlreadyDecided, NotFound, RunNotActive
from agent_core.models import ToolCall
from agent_core.runner.inline import InlineRunner
from approvals import services as port
from approvals.exceptions import ApprovalExpired, InvalidDecision
from approvals.models import DecisionAttempt
from demo.models import Refund
from tests.conftest import ALICE, BOB, REFUND, calls_of, settled, wait_for


@pytest.mark.django_db
def test_a_decision_on_an_unknown_call_is_not_found_and_audited():
    with pytest.raises(NotFound):
        port.approve("tc_nope", actor=ALICE)
    attempt = DecisionAttempt.objects.get()
    assert (attempt.tool_call_id, attempt.outcome) == ("tc_nope", "not_found")


@pytest.mark.django_db
def test_a_stranger_may_not_decide_nor_learn_that_the_call_exists(turn, decide):
    run = turn(REFUND)
    [call] = calls_of(run)
    with pytest.raises(NotFound):
        decide(port.approve, call.pk, actor=BOB)
    call.refresh_from_db()
    assert call.status == CallStatus.PENDING_APPROVAL
    assert DecisionAttempt.objects.get().outcome == "not_found"


@pytest.mark.django_db
def test_reject_after_approve_conflicts(turn, decide):
    run = turn(REFUND)
    [call] = calls_of(run)
    decide(port.approve, call.pk, actor=ALICE)
    with pytest.raises(AlreadyDecided):
        decide(port.reject, call.pk, actor=ALICE, reason="changed my mind")
    assert Refund.objects.count() == 1
    outcomes = list(
        DecisionAttempt.objects.order_by("created_at").values_list("outcome", flat=True)
    )
    assert outcomes == ["applied", "already_decided"]


@pytest.mark.django_db
def test_invalid_edited_args_change_nothing(turn, decide):
    run = turn(REFUND)
    [call] = calls_of(run)
    with pytest.raises(InvalidDecision) as info:
        decide(port.approve, call.pk, actor=ALICE, args={"order_id": "A-1001", "amount": "x"})
    assert info.value.errors[0]["loc"] == ["amount"]
    call.refresh_from_db()
    assert call.status == CallStatus.PENDING_APPROVAL and call.original_args is None


@pytest.mark.django_db
def test_an_expired_request_answers_gone_and_the_model_is_told(turn, decide):
    run = turn(REFUND)
    [call] = calls_of(run)
    ToolCall.objects.filter(pk=call.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    with pytest.raises(ApprovalExpired):
        decide(port.approve, call.pk, actor=ALICE)
    call.refresh_from_db()
    run.refresh_from_db()
    assert call.status == CallStatus.EXPIRED and call.decided_via == "expiry"
    assert run.status == RunStatus.COMPLETED
    assert Refund.objects.count() == 0
    tool_result = run.messages.get(role="tool").content[0]
    assert "expired" in tool_result["output"]
    with pytest.raises(ApprovalExpired):
        decide(port.approve, call.pk, actor=ALICE)


@pytest.mark.django_db
def test_a_dead_runs_calls_answer_run_not_active(turn, decide):
    run = turn(REFUND)
    [call] = calls_of(run)
    runs.fail_run(run.pk, code="run_failed", message="the worker's disk caught fire")
    call.refresh_from_db()
    assert call.status == CallStatus.FAILED
    with pytest.raises(RunNotActive):
        decide(port.approve, call.pk, actor=ALICE)
    # The next turn gives the model a result for the dead run's call.
    nxt = turn("hello", thread_id=run.thread_id)
    assert nxt.status == RunStatus.COMPLETED
    result = run.messages.get(role="tool").content[0]
    assert result["tool_call_id"] == call.pk and result["is_error"]


@pytest.mark.django_db
def test_ask_the_user(turn, decide):
    run = turn('/call ask_user {"question": "Which order?"}')
    [call] = calls_of(run)
    assert call.status == CallStatus.PENDING_INPUT and run.status == RunStatus.WAITING
    with pytest.raises(InvalidDecision):
        decide(port.answer, call.pk, actor=ALICE, answer={"answer": ""})
    with pytest.raises(NotFound):
        decide(port.answer, call.pk, actor=BOB, answer={"answer": "A-1001"})
    decide(port.answer, call.pk, actor=ALICE, answer={"answer": "A-1001"})
    call.refresh_from_db()
    run.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED and call.result == {"answer": "A-1001"}
    assert run.status == RunStatus.COMPLETED
    with pytest.raises(AlreadyAnswered):
        decide(port.answer, call.pk, actor=ALICE, answer={"answer": "A-1002"})


@pytest.mark.django_db(transaction=True)
def test_concurrent_decisions_on_one_call_have_one_winner(shop, threaded_runner):
    run = runs.start_run(agent="support", message=REFUND, actor=ALICE)
    wait_for("the run to wait", settled(run.pk, RunStatus.WAITING))
    [call] = calls_of(run)
    barrier = threading.Barrier(8)
    results: list[str] = []

    def attempt(i: int) -> None:
        barrier.wait()
        try:
            if i % 2:
                results.append(port.reject(call.pk, actor=ALICE, reason="no").result)
            else:
                results.append(port.approve(call.pk, actor=ALICE).result)
        except AlreadyDecided:
            results.append("conflict")
        finally:
            connection.close()

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count("applied") == 1
    winner_rejected = ToolCall.objects.get(pk=call.pk).decided_by_ref and (
        ToolCall.objects.get(pk=call.pk).status == CallStatus.REJECTED
    )
    # Identical repeats of the winner are unchanged; the other kind conflicts.
    assert results.count("unchanged") == 3 and results.count("conflict") == 4
    wait_for("the run to complete", settled(run.pk, RunStatus.COMPLETED))
    assert Refund.objects.count() == (0 if winner_rejected else 1)
    assert DecisionAttempt.objects.count() == 8


@pytest.mark.django_db(transaction=True)
def test_a_waiting_run_is_redriven_by_a_new_runner_after_a_restart(shop, threaded_runner):
    run = runs.start_run(agent="support", message=REFUND, actor=ALICE)
    wait_for("the run to wait", settled(run.pk, RunStatus.WAITING))
    threaded_runner.shutdown()
    set_runner(None)  # the process is gone; what remains is the database
    restarted = InlineRunner(workers=2)
    set_runner(restarted)
    try:
        [call] = calls_of(run)
        port.approve(call.pk, actor=ALICE)
        wait_for("the run to complete", settled(run.pk, RunStatus.COMPLETED))
        assert Refund.objects.filter(tool_call_id=call.pk).count() == 1
    finally:
        restarted.shutdown()


def test_each_decision_returns_its_outcome_with_the_call_as_it_left_it(turn):
    """``approve`` / ``reject`` / ``answer`` take the actor and return an ``Outcome``: what the
    decision did, and the call as the decision left it (no paired ``approval`` / ``rejection``)."""
    [refund_call] = calls_of(turn(REFUND))
    outcome = port.approve(refund_call.pk, actor=ALICE)
    assert outcome.result == port.Result.APPLIED
    assert outcome.call.pk == refund_call.pk and outcome.call.status == CallStatus.APPROVED
    again = port.approve(refund_call.pk, actor=ALICE)
    assert again.result == port.Result.UNCHANGED
    [other] = calls_of(turn(REFUND))
    rejected = port.reject(other.pk, actor=ALICE, reason="no")
    assert (rejected.result, rejected.call.status) == (port.Result.APPLIED, CallStatus.REJECTED)
    [question] = calls_of(turn('/call ask_user {"question": "Which order?"}'))
    answered = port.answer(question.pk, actor=ALICE, answer={"answer": "A-1"})
    assert (answered.result, answered.call.status) == (port.Result.APPLIED, CallStatus.SUCCEEDED)
    assert not hasattr(port, "approval") and not hasattr(port, "rejection")


def test_every_decision_attempt_is_written_and_traced_by_one_writer():
    """Links, amendments, escalation and the port write attempts through ``attempts.audit``
    (which traces them): no module writes a ``DecisionAttempt`` row another way."""
    root = Path(__file__).resolve().parents[2]
    writers = [
        f"{path.relative_to(root)}:{node.lineno}"
        for app in ("approvals", "console", "agent_core")
        for path in (root / app).rglob("*.py")
        if "migrations" not in path.parts
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute)
        and node.attr in ("create", "bulk_create", "get_or_create", "update_or_create")
        and "DecisionAttempt" in ast.unparse(node.value)
    ]
    assert writers == []
    users = {
        path.name
        for path in (root / "approvals").rglob("*.py")
        if "sql.AUDIT_ATTEMPT" in path.read_text()
    }
    assert users == {"attempts.py"}
