"""Delegation (SPEC §14) on real Celery workers, and under SIGKILL of a worker: every run reaches
its outcome, each effect happens once, and no ancestor's stream has a gap or a duplicate."""

from __future__ import annotations

import json
import threading

import pytest
from django.db import connection

from agent_core.choices import CallStatus, RunStatus
from agent_core.engine import cancel
from agent_core.models import Run, Step, StreamFrame, ToolCall
from approvals import services as port
from demo.models import Refund
from tests.conftest import ALICE, settled, wait_for

from .conftest import Cluster, assert_frames_gapless, idle_in_transaction, start

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("shop")]

LONG = "600"  # seconds a paused worker would wait; it is killed long before
REFUND = '/call issue_refund {"order_id": "A-1001", "amount": 30}'
ASK = f"/call ask_billing {json.dumps({'message': REFUND})}"


def waiting_child(cluster: Cluster, parent: Run) -> tuple[Run, ToolCall]:
    """The child run parked on its refund, and that refund's card."""
    found = wait_for(
        "the child's card",
        lambda: ToolCall.objects.filter(
            run__parent_run=parent, status=CallStatus.PENDING_APPROVAL
        ).first(),
        cluster,
    )
    wait_for("the parent to park", settled(parent.pk, RunStatus.WAITING), cluster)
    return Run.objects.get(pk=found.run_id), found


def completed_once(cluster: Cluster, parent: Run, child: Run, refund: ToolCall) -> None:
    """Both runs completed; the refund ran once; the child's answer is the parent's result."""
    wait_for("the parent to complete", settled(parent.pk, RunStatus.COMPLETED), cluster)
    assert Run.objects.get(pk=child.pk).status == RunStatus.COMPLETED
    assert Refund.objects.filter(tool_call_id=refund.pk).count() == 1
    [delegation] = ToolCall.objects.filter(run=parent)
    assert delegation.status == CallStatus.SUCCEEDED and delegation.attempts == 1
    assert "issue_refund returned" in str(delegation.result)
    assert Run.objects.filter(parent_run=parent).count() == 1
    for run_id in (parent.pk, child.pk):
        assert_frames_gapless(run_id)
    # Each of the child's frames once in the parent's stream, in the child's order.
    own = list(StreamFrame.objects.filter(run=child).order_by("seq").values_list("kind", flat=True))
    mirrored = StreamFrame.objects.filter(run=parent, data__run_id=child.pk).order_by("seq")
    assert [f.kind for f in mirrored] == own


def test_a_child_card_approved_by_id_completes_the_child_then_the_parent(cluster: Cluster) -> None:
    cluster.beat()
    cluster.worker()
    parent = start(ASK, agent="desk")
    child, refund = waiting_child(cluster, parent)
    assert port.approve(refund.pk, actor=ALICE).result == port.Result.APPLIED
    completed_once(cluster, parent, child, refund)


def test_kill_while_the_parent_starts_its_child_starts_it_once(cluster: Cluster) -> None:
    cluster.beat()
    first = cluster.worker(AIRLOCK_TEST_PAUSE_BEFORE_TOOL=LONG)
    parent = start(ASK, agent="desk")
    wait_for(
        "the delegation step to be taken",
        lambda: (
            Run.objects.filter(pk=parent.pk, lease_owner__startswith="celery:").exists()
            and ToolCall.objects.filter(run=parent).exists()
        ),
        cluster,
    )
    cluster.kill(first)
    assert not Run.objects.filter(parent_run=parent).exists()
    cluster.worker()
    child, refund = waiting_child(cluster, parent)
    port.approve(refund.pk, actor=ALICE)
    completed_once(cluster, parent, child, refund)


def test_kill_while_a_child_step_runs_finishes_both_once(cluster: Cluster) -> None:
    cluster.beat()
    first = cluster.worker(DEMO_REFUND_DELAY=LONG)
    parent = start(ASK, agent="desk")
    child, refund = waiting_child(cluster, parent)
    port.approve(refund.pk, actor=ALICE)
    wait_for("the refund's open transaction", lambda: idle_in_transaction() > 0, cluster)
    cluster.kill(first)
    assert Refund.objects.count() == 0
    cluster.worker()
    completed_once(cluster, parent, child, refund)


def test_kill_once_the_child_completed_resumes_the_parent_once(cluster: Cluster) -> None:
    cluster.beat()
    first = cluster.worker()
    parent = start(ASK, agent="desk")
    child, refund = waiting_child(cluster, parent)
    port.approve(refund.pk, actor=ALICE)
    wait_for("the child to complete", settled(child.pk, RunStatus.COMPLETED), cluster)
    cluster.kill(first)  # the parent is queued, or being driven by the worker killed
    cluster.worker()
    completed_once(cluster, parent, child, refund)


def test_cancel_of_the_parent_while_the_child_waits_cancels_both(cluster: Cluster) -> None:
    cluster.beat()
    cluster.worker()
    parent = start(ASK, agent="desk")
    child, refund = waiting_child(cluster, parent)
    cancel.request_cancel(parent.pk, actor=ALICE)
    wait_for("the child to be cancelled", settled(child.pk, RunStatus.CANCELLED), cluster)
    assert Run.objects.get(pk=parent.pk).status == RunStatus.CANCELLED
    refund.refresh_from_db()
    assert refund.status == CallStatus.CANCELLED and not Refund.objects.exists()
    for run_id in (parent.pk, child.pk):
        assert_frames_gapless(run_id)
        last = StreamFrame.objects.filter(run_id=run_id).order_by("-seq").first()
        assert last is not None and last.kind == "finish" and "run_id" not in last.data


REVIEW = f"/call ask_review {json.dumps({'message': REFUND})}"


def parked_branches(cluster: Cluster, parent: Run) -> tuple[Run, list[ToolCall]]:
    """The review run, once both its branches wait on a person; their two cards."""
    cards = wait_for(
        "both branches' cards",
        lambda: (
            found
            if len(
                found := list(
                    ToolCall.objects.filter(
                        run__parent_run__parent_run=parent, status=CallStatus.PENDING_APPROVAL
                    )
                )
            )
            == 2
            else None
        ),
        cluster,
    )
    review = Run.objects.get(parent_run=parent)
    wait_for("the review to park", settled(review.pk, RunStatus.WAITING), cluster)
    return review, cards


def merged_once(cluster: Cluster, parent: Run, review: Run) -> None:
    wait_for("the parent to complete", settled(parent.pk, RunStatus.COMPLETED), cluster)
    answer = str(ToolCall.objects.get(run=parent).result)
    assert answer.startswith("lawyer: Done.") and " | designer: Done." in answer
    assert Refund.objects.count() == 2
    assert Step.objects.filter(run=review, name__startswith="llm:").count() == 2
    assert Run.objects.filter(parent_run=review).count() == 2
    for run in Run.objects.all():
        assert_frames_gapless(run.pk)
    for run_id in (parent.pk, review.pk):
        finishes = StreamFrame.objects.filter(run_id=run_id, kind="finish")
        assert len([f for f in finishes if "run_id" not in f.data]) == 1


def test_two_last_decisions_at_once_on_two_workers_merge_once(cluster: Cluster) -> None:
    cluster.beat()
    cluster.worker()
    cluster.worker()
    parent = start(REVIEW, agent="desk")
    review, cards = parked_branches(cluster, parent)
    barrier = threading.Barrier(2)
    outcomes: list[port.Outcome] = []

    def approve(call_id: str) -> None:
        try:
            barrier.wait()
            outcomes.append(port.approve(call_id, actor=ALICE))
        finally:
            connection.close()

    threads = [threading.Thread(target=approve, args=(c.pk,)) for c in cards]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [o.result for o in outcomes] == [port.Result.APPLIED] * 2
    merged_once(cluster, parent, review)


def test_kill_while_the_merge_runs_records_it_once(cluster: Cluster) -> None:
    cluster.beat()
    first = cluster.worker(AIRLOCK_TEST_MERGE_DELAY=LONG)
    parent = start(REVIEW, agent="desk")
    review, cards = parked_branches(cluster, parent)
    for card in cards:
        port.approve(card.pk, actor=ALICE)
    wait_for(
        "the merge step to start",
        lambda: Step.objects.filter(run=review, name="llm:1").exists(),
        cluster,
    )
    cluster.kill(first)
    cluster.worker()
    merged_once(cluster, parent, review)
    assert Step.objects.get(run=review, name="llm:1").attempts == 2


def test_kill_during_a_childs_model_step_supersedes_its_text_in_the_parent_too(
    cluster: Cluster,
) -> None:
    cluster.beat()
    first = cluster.worker(AIRLOCK_TEST_SLOW_MODEL=LONG)
    parent = start(f"/call ask_slow {json.dumps({'message': 'hello'})}", agent="desk")
    wait_for(
        "the child's first text in the parent's stream",
        lambda: StreamFrame.objects.filter(run=parent, kind="text").exists(),
        cluster,
    )
    cluster.kill(first)
    cluster.worker()
    wait_for("the parent to complete", settled(parent.pk, RunStatus.COMPLETED), cluster)
    child = Run.objects.get(parent_run=parent)
    for run_id in (parent.pk, child.pk):
        assert_frames_gapless(run_id)
    mirrored = list(StreamFrame.objects.filter(run=parent, kind="text", data__run_id=child.pk))
    own = list(StreamFrame.objects.filter(run=child, kind="text"))
    assert [f.superseded for f in mirrored] == [f.superseded for f in own]
    assert any(f.superseded for f in mirrored) and not all(f.superseded for f in mirrored)


def test_a_rejected_child_card_is_told_to_the_parent_which_completes(cluster: Cluster) -> None:
    cluster.worker()
    parent = start(ASK, agent="desk")
    _, refund = waiting_child(cluster, parent)
    port.reject(refund.pk, actor=ALICE, reason="not this one")
    wait_for("the parent to complete", settled(parent.pk, RunStatus.COMPLETED), cluster)
    answer = str(ToolCall.objects.get(run=parent).result)
    assert "rejected" in answer and "not this one" in answer and not Refund.objects.exists()


def test_a_detached_child_runs_on_its_own(cluster: Cluster) -> None:
    cluster.worker()
    parent = start(f"/call start_billing {json.dumps({'message': REFUND})}", agent="desk")
    wait_for("the parent to complete", settled(parent.pk, RunStatus.COMPLETED), cluster)
    child = Run.objects.get(parent_run=parent)
    assert ToolCall.objects.get(run=parent).result == {"run_id": child.pk}
    wait_for("the child to park", settled(child.pk, RunStatus.WAITING), cluster)
    port.approve(ToolCall.objects.get(run=child).pk, actor=ALICE)
    wait_for("the child to complete", settled(child.pk, RunStatus.COMPLETED), cluster)
    assert not StreamFrame.objects.filter(run=parent, data__run_id=child.pk).exists()


def test_a_cycle_is_refused_on_the_workers_too(cluster: Cluster) -> None:
    cluster.worker()
    back = f"/call ask_desk {json.dumps({'message': 'hi'})}"
    parent = start(f"/call ask_relay {json.dumps({'message': back})}", agent="desk")
    wait_for("the parent to complete", settled(parent.pk, RunStatus.COMPLETED), cluster)
    [refused] = ToolCall.objects.filter(run__parent_run=parent)
    assert refused.status == CallStatus.FAILED and refused.error.startswith("delegation_cycle")
