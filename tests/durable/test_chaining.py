"""Durable chaining (SPEC §12): one task takes a run's steps one after another.

Real Celery worker processes: a task chains the steps of its queue under one lease (the lease
token counts the tasks that drove a run), hands a step of another queue to the workers of that
queue only, stops after its slice, and a worker SIGKILLed in the middle of a chain loses
nothing and repeats no effect.
"""

from __future__ import annotations

import pytest

from agent_core.choices import CallStatus
from agent_core.models import Run, Step, StreamFrame, ToolCall
from tests.conftest import settled, wait_for

from .conftest import LEASE_SECONDS, Cluster, assert_frames_gapless, start

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("shop")]

LONG = "600"  # seconds a paused worker would wait; it is killed long before
LOOKUP = '/call lookup_order {"order_id": "A-1001"}'


def completed(cluster: Cluster, run: Run) -> Run:
    wait_for("the run to complete", settled(run.pk, "completed"), cluster)
    assert_frames_gapless(run.pk)
    run.refresh_from_db()
    return run


def token(run: Run) -> int:
    """How many times the run's lease was taken: once per task that drove it."""
    return Run.objects.values_list("lease_token", flat=True).get(pk=run.pk)


def looked_up_once(run: Run) -> ToolCall:
    [call] = ToolCall.objects.filter(run=run)
    assert call.status == CallStatus.SUCCEEDED and call.attempts == 1
    assert Step.objects.filter(run=run, name=f"tool:{call.pk}").count() == 1
    assert Step.objects.get(run=run, name="llm:0").attempts == 1
    return call


def test_one_task_takes_every_step_of_its_queue(cluster: Cluster) -> None:
    cluster.worker()
    run = completed(cluster, start(LOOKUP))  # llm:0 → the read → llm:1, all on agent.llm
    assert token(run) == 1
    looked_up_once(run)


def test_a_task_hands_the_run_on_after_its_slice_of_steps(cluster: Cluster) -> None:
    cluster.worker(AIRLOCK_TEST_CHAIN_MAX_STEPS="1")
    run = completed(cluster, start(LOOKUP))
    assert token(run) == 3  # one task a step
    looked_up_once(run)


def test_a_tool_with_a_queue_runs_only_on_a_worker_listening_there(cluster: Cluster) -> None:
    main = cluster.worker()
    run = start('/call read_vault {"key": "k"}')
    wait_for(
        "the model step's task to end, handing the read to agent.vault",
        lambda: "succeeded" in cluster.log_of(main),
        cluster,
    )
    [call] = ToolCall.objects.filter(run=run)
    assert call.status == CallStatus.APPROVED  # the worker on agent.llm / agent.tool left it
    vault = cluster.worker(queues="agent.vault")
    run = completed(cluster, run)
    call.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED and call.result == {"key": "k", "pid": vault.pid}
    assert token(run) == 3  # agent.llm, agent.vault, agent.llm: the lease passed by token


def test_a_chain_that_outlasts_its_lease_keeps_it_by_the_heartbeat(cluster: Cluster) -> None:
    cluster.beat()
    cluster.worker(AIRLOCK_TEST_PAUSE_AFTER_TOOL=str(3 * LEASE_SECONDS))
    run = start(LOOKUP)
    wait_for(
        "the read to be recorded in the chain",
        lambda: ToolCall.objects.filter(run=run, status=CallStatus.SUCCEEDED).exists(),
        cluster,
    )
    # While the first worker pauses for three leases, another could take the run over from the
    # sweeper, if its lease ran out.
    cluster.worker()
    run = completed(cluster, run)
    assert token(run) == 1  # llm:0, the read and llm:1: one task, one lease, renewed
    looked_up_once(run)


def test_kill_between_two_chained_steps_repeats_nothing(cluster: Cluster) -> None:
    cluster.beat()
    first = cluster.worker(AIRLOCK_TEST_PAUSE_AFTER_TOOL=LONG)
    run = start(LOOKUP)
    wait_for(
        "the read to be recorded in the chain",
        lambda: ToolCall.objects.filter(run=run, status=CallStatus.SUCCEEDED).exists(),
        cluster,
    )
    assert token(run) == 1  # llm:0 and the read: one task
    cluster.kill(first)
    # The killed task is redelivered to the next worker and backs off (the lease is still
    # live); the sweeper re-drives the run once the lease expires.
    cluster.worker()
    run = completed(cluster, run)
    looked_up_once(run)
    assert token(run) > 1
    assert Step.objects.get(run=run, name="llm:1").status == "completed"


def test_kill_during_a_step_that_follows_a_chained_one(cluster: Cluster) -> None:
    cluster.beat()
    first = cluster.worker(AIRLOCK_TEST_SLOW_MODEL=LONG, AIRLOCK_TEST_SLOW_AFTER_TOOLS="1")
    run = start(LOOKUP, agent="slow")
    wait_for(
        "llm:1 to stream, after the chained read",
        lambda: StreamFrame.objects.filter(run=run, kind="text", seq__gt=output_seq(run)).exists(),
        cluster,
    )
    assert token(run) == 1  # llm:0, the read and llm:1: one task
    cluster.kill(first)
    cluster.worker()
    run = completed(cluster, run)
    looked_up_once(run)
    assert Step.objects.get(run=run, name="llm:1").attempts == 2
    cut_short = StreamFrame.objects.filter(run=run, superseded=True)
    assert cut_short.exists() and all(f.seq > output_seq(run) for f in cut_short)


def output_seq(run: Run) -> int:
    frame = StreamFrame.objects.filter(run=run, kind="tool-output").first()
    return frame.seq if frame is not None else 10**9
