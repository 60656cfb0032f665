"""Guarantees 2, 4, 5, 6, 8, 10 and 12 under SIGKILL of real Celery worker processes.

Each test starts workers (``-P solo``) against the test database, kills one at a chosen moment,
starts another and checks the documented outcome: each effect happened exactly once (or, for
the ambiguous case without ``recover()``, at most once with the call in doubt and listed), no
decision was lost, and the run's frames are numbered 1..n without a gap or a duplicate.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from agent_core.choices import CallStatus, RunStatus
from agent_core.engine import runs
from agent_core.engine.transcript import NEVER_COMPLETED
from agent_core.exceptions import RunNotActive
from agent_core.models import Message, Run, Step, StreamFrame, ToolCall
from approvals import services as port
from approvals.exceptions import ApprovalExpired
from approvals.models import DecisionAttempt
from demo.models import CachePurge, MailerSend, Refund
from tests.conftest import ALICE, REFUND, settled, wait_for

from .conftest import (
    LEASE_SECONDS,
    Cluster,
    assert_frames_gapless,
    idle_in_transaction,
    start,
)

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("shop")]

LONG = "600"  # seconds a paused worker would wait; it is killed long before


def the_call(run: Run) -> ToolCall:
    [call] = ToolCall.objects.filter(run=run, kind="action")
    return call


def wait_waiting(cluster: Cluster, run: Run) -> ToolCall:
    wait_for("the run to park", settled(run.pk, RunStatus.WAITING), cluster)
    return the_call(run)


def assert_decided_by_alice(call: ToolCall) -> None:
    call.refresh_from_db()
    assert call.decided_by_ref == ALICE.ref and call.decided_at is not None
    assert DecisionAttempt.objects.filter(tool_call_id=call.pk, action="approve").count() == 1


def refunded_once_by_a_new_worker(cluster: Cluster, run: Run, call: ToolCall) -> None:
    """A fresh worker finishes the run: the refund ran once, on Alice's one approval."""
    cluster.worker()
    completed(cluster, run)
    call.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED and call.attempts == 1
    assert Refund.objects.filter(tool_call_id=call.pk).count() == 1
    assert_decided_by_alice(call)


def completed(cluster: Cluster, run: Run) -> Run:
    wait_for("the run to complete", settled(run.pk, RunStatus.COMPLETED), cluster)
    assert_frames_gapless(run.pk)
    run.refresh_from_db()
    return run


def test_a_run_parked_by_one_worker_is_approved_elsewhere_and_finished_by_a_third(
    cluster: Cluster,
) -> None:
    first = cluster.worker()
    run = start(REFUND)
    call = wait_waiting(cluster, run)
    cluster.kill(first)
    # No worker is alive: this process (the web process) commits the decision.
    assert port.approve(call.pk, actor=ALICE).result == port.Result.APPLIED
    refunded_once_by_a_new_worker(cluster, run, call)
    owners = set(Step.objects.filter(run=run).values_list("name", flat=True))
    assert owners == {"llm:0", f"tool:{call.pk}", "llm:1"}


def test_kill_during_a_model_step_re_requests_it_and_supersedes_its_text(
    cluster: Cluster,
) -> None:
    cluster.beat()
    first = cluster.worker(AIRLOCK_TEST_SLOW_MODEL=LONG)
    run = start("hello", agent="slow")
    wait_for(
        "the first text frame",
        lambda: StreamFrame.objects.filter(run=run, kind="text").exists(),
        cluster,
    )
    cluster.kill(first)
    cluster.worker()
    run = completed(cluster, run)
    step = Step.objects.get(run=run, name="llm:0")
    assert step.attempts == 2 and step.status == "completed"
    texts = list(StreamFrame.objects.filter(run=run, kind="text").order_by("seq"))
    cut_short = [f for f in texts if f.superseded]
    assert cut_short and cut_short[0].data["text"].startswith("thinking")
    starts = StreamFrame.objects.filter(run=run, kind="step-start").order_by("seq")
    assert [f.data["attempt"] for f in starts] == [1, 2]
    assert all(f.seq < starts[1].seq for f in cut_short)
    assert all(not f.superseded for f in texts if f.seq > starts[1].seq)


def test_kill_after_the_model_step_is_recorded_reads_it_back(cluster: Cluster) -> None:
    cluster.beat()
    first = cluster.worker(AIRLOCK_TEST_PAUSE_AFTER_LLM=LONG)
    run = start('/call lookup_order {"order_id": "A-1001"}')
    wait_for(
        "llm:0 to be recorded",
        lambda: Step.objects.filter(run=run, name="llm:0", status="completed").exists(),
        cluster,
    )
    cluster.kill(first)
    # Killed in its pause, before the tool step it opened was taken.
    assert not ToolCall.objects.filter(run=run, status=CallStatus.SUCCEEDED).exists()
    cluster.worker()
    run = completed(cluster, run)
    assert Step.objects.get(run=run, name="llm:0").attempts == 1  # never re-requested
    [call] = ToolCall.objects.filter(run=run)
    assert call.status == CallStatus.SUCCEEDED and call.attempts == 1


def test_kill_after_approval_before_the_claim_runs_the_tool_once(cluster: Cluster) -> None:
    cluster.beat()
    first = cluster.worker(AIRLOCK_TEST_PAUSE_BEFORE_TOOL=LONG)
    run = start(REFUND)
    call = wait_waiting(cluster, run)
    port.approve(call.pk, actor=ALICE)
    wait_for(
        "a worker to take the lease for the tool step",
        lambda: Run.objects.filter(pk=run.pk, lease_owner__startswith="celery:").exists(),
        cluster,
    )
    cluster.kill(first)
    call.refresh_from_db()
    assert call.status == CallStatus.APPROVED
    refunded_once_by_a_new_worker(cluster, run, call)


def test_kill_inside_an_atomic_tool_rolls_it_back_and_runs_it_once(cluster: Cluster) -> None:
    cluster.beat()
    first = cluster.worker(DEMO_REFUND_DELAY=LONG)
    run = start(REFUND)
    call = wait_waiting(cluster, run)
    port.approve(call.pk, actor=ALICE)
    wait_for("the refund's open transaction", lambda: idle_in_transaction() > 0, cluster)
    cluster.kill(first)
    assert Refund.objects.count() == 0
    call.refresh_from_db()
    assert call.status == CallStatus.APPROVED  # the claim rolled back with the effect
    refunded_once_by_a_new_worker(cluster, run, call)


def test_kill_inside_a_tool_with_recover_records_the_effect_once(cluster: Cluster) -> None:
    cluster.beat()
    first = cluster.worker(DEMO_MAILER_DELAY=LONG)
    run = start('/call send_campaign {"campaign_id": "spring-sale"}')
    call = wait_waiting(cluster, run)
    port.approve(call.pk, actor=ALICE)
    wait_for("the mailer to send", lambda: MailerSend.objects.exists(), cluster)
    cluster.kill(first)
    cluster.worker()
    completed(cluster, run)
    call.refresh_from_db()
    sent = MailerSend.objects.get()
    assert sent.idempotency_key == f"airlock-{call.pk}"
    assert call.status == CallStatus.SUCCEEDED and call.attempts == 1
    assert call.result == {"send_id": sent.pk, "recipients": 40_000}
    assert_decided_by_alice(call)


def test_kill_inside_an_idempotent_tool_runs_it_again_with_the_same_key(
    cluster: Cluster,
) -> None:
    cluster.beat()
    first = cluster.worker(AIRLOCK_TEST_NOTIFY_DELAY=LONG)
    run = start('/call notify_customer {"order_id": "A-1001"}')
    call = wait_waiting(cluster, run)
    port.approve(call.pk, actor=ALICE)
    wait_for("the provider to record the send", lambda: MailerSend.objects.exists(), cluster)
    cluster.kill(first)
    cluster.worker()
    completed(cluster, run)
    call.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED and call.attempts == 2
    assert MailerSend.objects.filter(idempotency_key=f"airlock-{call.pk}").count() == 1
    assert_decided_by_alice(call)


def _blocked_on_doubt(cluster: Cluster, message: str) -> tuple[Run, ToolCall]:
    cluster.beat()
    first = cluster.worker(DEMO_PURGE_DELAY=LONG)
    run = start(message)
    call = wait_waiting(cluster, run)
    port.approve(call.pk, actor=ALICE)
    wait_for("the purge to happen", lambda: CachePurge.objects.exists(), cluster)
    cluster.kill(first)
    cluster.worker()
    wait_for(
        "the run to stop on the call in doubt",
        lambda: Run.objects.filter(pk=run.pk, error_code="side_effect_retry_blocked").exists(),
        cluster,
    )
    run.refresh_from_db()
    call.refresh_from_db()
    assert run.status == RunStatus.WAITING and run.lease_owner == ""
    assert call.status == CallStatus.IN_DOUBT
    assert list(ToolCall.objects.filter(status=CallStatus.IN_DOUBT)) == [call]  # listed
    assert CachePurge.objects.count() == 1  # not re-run silently
    assert_decided_by_alice(call)
    return run, call


def test_kill_inside_a_plain_tool_blocks_until_a_person_marks_it_done(cluster: Cluster) -> None:
    run, call = _blocked_on_doubt(cluster, '/call purge_cache {"path": "/products"}')
    assert port.mark_done(call.pk, actor=ALICE, result={"purged": "/products"}).result == "applied"
    completed(cluster, run)
    call.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED and call.result == {"purged": "/products"}
    assert CachePurge.objects.count() == 1
    assert DecisionAttempt.objects.filter(tool_call_id=call.pk, action="mark_done").count() == 1


def test_marked_not_done_a_plain_tool_runs_again(cluster: Cluster) -> None:
    run, call = _blocked_on_doubt(cluster, '/call purge_cache {"path": "/products"}')
    CachePurge.objects.all().delete()  # the person checked: the purge did not reach the CDN
    assert port.mark_not_done(call.pk, actor=ALICE).result == "applied"
    completed(cluster, run)
    call.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED and call.attempts == 2
    assert CachePurge.objects.count() == 1


def test_marked_not_done_an_attempt_scoped_tool_asks_again(cluster: Cluster) -> None:
    run, call = _blocked_on_doubt(cluster, '/call purge_strict {"path": "/products"}')
    port.mark_not_done(call.pk, actor=ALICE)
    call.refresh_from_db()
    assert call.status == CallStatus.PENDING_APPROVAL
    wait_for("the run to park again", settled(run.pk, RunStatus.WAITING), cluster)
    port.approve(call.pk, actor=ALICE)
    completed(cluster, run)
    call.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED and call.attempts == 2
    assert DecisionAttempt.objects.filter(tool_call_id=call.pk, action="approve").count() == 2


def test_kill_after_a_tool_finished_goes_on_without_running_it_again(cluster: Cluster) -> None:
    cluster.beat()
    first = cluster.worker(AIRLOCK_TEST_PAUSE_AFTER_TOOL=LONG)
    run = start(REFUND)
    call = wait_waiting(cluster, run)
    port.approve(call.pk, actor=ALICE)
    wait_for(
        "the refund to be recorded",
        lambda: ToolCall.objects.filter(pk=call.pk, status=CallStatus.SUCCEEDED).exists(),
        cluster,
    )
    cluster.kill(first)
    cluster.worker()
    completed(cluster, run)
    call.refresh_from_db()
    assert call.attempts == 1
    assert Refund.objects.filter(tool_call_id=call.pk).count() == 1
    assert Step.objects.filter(run=run, name=f"tool:{call.pk}").count() == 1
    # The refund's record opened llm:1 in its transaction (one task chains them): that opening
    # is re-made by the next worker, but the killed one never asked the model for it.
    assert Step.objects.get(run=run, name="llm:1").attempts == 2
    assert not StreamFrame.objects.filter(run=run, superseded=True).exists()


def test_retryable_model_errors_are_retried_with_backoff(cluster: Cluster) -> None:
    cluster.worker(AIRLOCK_TEST_FLAKY="2")
    run = start("hello", agent="flaky")
    run = completed(cluster, run)
    assert Step.objects.get(run=run, name="llm:0").attempts == 3


def test_a_journal_the_code_does_not_reach_kills_the_run_and_poisons_nothing(
    cluster: Cluster,
) -> None:
    cluster.beat()
    first = cluster.worker(AIRLOCK_TEST_PAUSE_AFTER_LLM=LONG)
    run = start(f'/call lookup_order {{"order_id": "A-1001"}}\n{REFUND}')
    wait_for(
        "llm:0 to be recorded",
        lambda: Step.objects.filter(run=run, name="llm:0", status="completed").exists(),
        cluster,
    )
    cluster.kill(first)
    # The journal was written by code that took a step this code never reaches.
    Step.objects.create(run=run, name="llm:3", status="completed")
    cluster.worker()
    wait_for("the run to fail", settled(run.pk, RunStatus.FAILED), cluster)
    run.refresh_from_db()
    assert run.error_code == "replay_diverged" and run.lease_owner == ""
    assert run.thread.active_run_id is None
    lookup, refund = ToolCall.objects.filter(run=run).order_by("position")
    assert {lookup.status, refund.status} == {CallStatus.FAILED}
    with pytest.raises(RunNotActive):
        port.approve(refund.pk, actor=ALICE)
    assert Refund.objects.count() == 0
    assert_frames_gapless(run.pk)
    # The next turn gives the model a result for every call of the dead run.
    nxt = runs.start_run(agent="crash", message="hello", actor=ALICE, thread_id=run.thread_id)
    completed(cluster, nxt)
    results = {
        part["tool_call_id"]: part["output"]
        for message in Message.objects.filter(thread=run.thread, role="tool")
        for part in message.content
    }
    assert set(results) == {lookup.pk, refund.pk}
    assert all(NEVER_COMPLETED in output for output in results.values())


STALL = 10 * LEASE_SECONDS  # long enough for a second worker to start and take over


def test_a_stalled_worker_loses_its_lease_and_cannot_act_on_the_run(cluster: Cluster) -> None:
    # The first worker stalls right after taking the lease, before its heartbeat starts (a long
    # GC pause, a frozen VM): the lease expires, the sweeper gives the run to the second worker.
    cluster.beat()
    first = cluster.worker(AIRLOCK_TEST_PAUSE_BEFORE_TOOL=str(STALL))
    run = start(REFUND)
    call = wait_waiting(cluster, run)
    port.approve(call.pk, actor=ALICE)
    wait_for(
        "the first worker to take the lease",
        lambda: Run.objects.filter(pk=run.pk, lease_owner__startswith="celery:").exists(),
        cluster,
    )
    stalled_token = Run.objects.get(pk=run.pk).lease_token
    cluster.worker()
    run = completed(cluster, run)
    assert run.lease_token > stalled_token
    wait_for(
        "the stalled worker to wake up and give up",
        lambda: (
            "agent_core.advance_run" in cluster.log_of(first)
            and "succeeded" in cluster.log_of(first)
        ),
        cluster,
    )
    call.refresh_from_db()
    assert call.attempts == 1 and call.fence > stalled_token
    assert Refund.objects.filter(tool_call_id=call.pk).count() == 1
    assert_frames_gapless(run.pk)


def test_beat_expires_an_overdue_approval_with_no_one_watching(cluster: Cluster) -> None:
    first = cluster.worker()
    run = start(REFUND)
    call = wait_waiting(cluster, run)
    cluster.kill(first)
    # The deadline passes while no process is alive; then the sweeper comes back.
    ToolCall.objects.filter(pk=call.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    cluster.beat()
    cluster.worker()
    completed(cluster, run)
    call.refresh_from_db()
    assert call.status == CallStatus.EXPIRED and call.decided_via == "expiry"
    assert Refund.objects.count() == 0
    assert DecisionAttempt.objects.filter(tool_call_id=call.pk, action="expire").count() == 1
    with pytest.raises(ApprovalExpired):
        port.approve(call.pk, actor=ALICE)
