"""Fork and regenerate (SPEC §16) under SIGKILL: the process doing one, killed in the middle of
its transaction, leaves nothing; a Celery worker killed while it drives the regenerated run
leaves it to the next worker. Through all of it the refund approved before exists once."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agent_core.choices import CallStatus, RunStatus
from agent_core.conversation import history
from agent_core.engine import runs
from agent_core.models import Message, Run, Step, Thread, ToolCall
from approvals import services as port
from demo.models import Refund
from tests.conftest import ALICE, REFUND, settled, wait_for
from tests.processes import ROOT, django_env

from .conftest import Cluster, start

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("shop")]

LONG = "600"  # seconds a paused worker would wait; it is killed long before


def refunded(cluster: Cluster) -> Run:
    """Alice's refund, approved and run once by a worker the caller started."""
    run = start(REFUND)
    wait_for("the run to park", settled(run.pk, RunStatus.WAITING), cluster)
    port.approve(ToolCall.objects.get(run=run).pk, actor=ALICE)
    wait_for("the run to complete", settled(run.pk, RunStatus.COMPLETED), cluster)
    assert Refund.objects.count() == 1
    return run


def killed_after(statement: str, *args: str) -> None:
    """Run ``tests.durable.interrupted`` until it stops after ``statement``, then SIGKILL it."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.durable.interrupted", statement, *args],
        cwd=ROOT,
        env=django_env(AGENT_RUNNER="durable"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert proc.stdout is not None
    with proc.stdout:
        said = proc.stdout.readline()
        Cluster.kill(proc)
        assert said == b"paused\n", said + proc.stdout.read()


def test_a_fork_killed_midway_leaves_nothing_and_a_whole_one_repeats_nothing(
    cluster: Cluster,
) -> None:
    cluster.worker()
    run = refunded(cluster)
    proposing = Message.objects.filter(thread_id=run.thread_id).order_by("seq")[1]
    copying = 'INSERT INTO "agent_core_toolcall"'
    killed_after(copying, "fork", run.thread_id, proposing.pk, ALICE.ref)
    assert list(Thread.objects.values_list("pk", flat=True)) == [run.thread_id]
    assert Message.objects.exclude(thread_id=run.thread_id).count() == 0
    assert ToolCall.objects.count() == 1
    forked = history.fork(run.thread, proposing.pk, actor=ALICE)
    [copy] = ToolCall.objects.filter(thread=forked)
    assert copy.status == CallStatus.SUCCEEDED
    # A worker drives a turn on the fork: nothing is re-run.
    turn = runs.start_run(agent="crash", message="hello", actor=ALICE, thread_id=forked.pk)
    wait_for("the fork's turn", settled(turn.pk, RunStatus.COMPLETED), cluster)
    assert Refund.objects.count() == 1


def test_a_regenerate_killed_midway_leaves_nothing_and_its_run_survives_a_worker_kill(
    cluster: Cluster,
) -> None:
    cluster.beat()  # its sweeper re-drives the run whose worker is killed
    worker = cluster.worker()
    run = refunded(cluster)
    cluster.kill(worker)  # the next one stops after the regenerated run's model step
    dropping = 'UPDATE "agent_core_run" SET "dropped_at"'
    killed_after(dropping, "regenerate", run.thread_id, ALICE.ref)
    assert Run.objects.count() == 1 and Run.objects.get().dropped_at is None
    assert not Message.objects.filter(dropped_at__isnull=False).exists()
    first = cluster.worker(AIRLOCK_TEST_PAUSE_AFTER_LLM=LONG)
    again = history.regenerate(Thread.objects.get(pk=run.thread_id), actor=ALICE)
    wait_for(
        "the regenerated run's model step to be recorded",
        lambda: Step.objects.filter(run=again, name="llm:0", status="completed").exists(),
        cluster,
    )
    cluster.kill(first)
    cluster.worker()
    # The model asks for the refund again: a new call, waiting for its own approval.
    wait_for("the regenerated run to park", settled(again.pk, RunStatus.WAITING), cluster)
    [asked] = ToolCall.objects.filter(run=again)
    assert asked.status == CallStatus.PENDING_APPROVAL
    assert Refund.objects.count() == 1
    [original] = ToolCall.objects.filter(run=run)
    assert original.attempts == 1 and original.status == CallStatus.SUCCEEDED
