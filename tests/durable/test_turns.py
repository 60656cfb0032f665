"""Queued turns under SIGKILL of the process driving the active run (a Celery worker, or a web
process with the inline runner): each starts once, in order, when the re-driven run ends."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import httpx
import pytest

from agent_core.choices import RunStatus
from agent_core.conversation import turns
from agent_core.models import QueuedMessage, Run, StreamFrame
from tests.conftest import ALICE, wait_for
from tests.live.server import start_server

from .conftest import Cluster, assert_frames_gapless, start

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("shop")]

LONG = "600"  # seconds the first worker's model would stall; it is killed long before


def assert_started_in_order_once(thread_id: str, words: list[str]) -> list[Run]:
    """The thread's runs ran the messages in order, each queued message started exactly one run,
    and each run's stream named the run that followed it."""
    runs = list(Run.objects.filter(thread_id=thread_id).order_by("created_at"))
    assert [r.messages.filter(role="user").get().text for r in runs] == words
    assert all(r.status == RunStatus.COMPLETED for r in runs)
    queued = list(QueuedMessage.objects.filter(thread_id=thread_id).order_by("created_at"))
    assert [q.run_id for q in queued] == [r.pk for r in runs[1:]]
    for before, after in pairwise(runs):
        [frame] = StreamFrame.objects.filter(run=before, kind="next-turn")
        assert frame.data["next_run_id"] == after.pk
        assert_frames_gapless(before.pk)
    return runs


def test_queued_turns_start_in_order_after_the_driving_worker_is_killed(cluster: Cluster) -> None:
    cluster.beat()
    first = cluster.worker(AIRLOCK_TEST_SLOW_MODEL=LONG)
    run = start("hello", agent="slow")
    for word in ("one", "two"):
        queued = turns.start_turn(
            agent="crash", message=word, actor=ALICE, thread_id=run.thread_id, mode=turns.Mode.QUEUE
        )
        assert isinstance(queued, turns.Queued)
    wait_for(
        "the model step to stream",
        lambda: StreamFrame.objects.filter(run=run, kind="text").exists(),
        cluster,
    )
    cluster.kill(first)
    cluster.worker()
    wait_for(
        "three completed runs",
        lambda: (
            Run.objects.filter(thread_id=run.thread_id, status=RunStatus.COMPLETED).count() == 3
        ),
        cluster,
    )
    assert_started_in_order_once(run.thread_id, ["hello", "one", "two"])


@pytest.mark.django_db(transaction=True)
def test_queued_turns_start_in_order_after_the_inline_server_is_killed(tmp_path: Path) -> None:
    alice = {"X-Actor-Id": ALICE.ref}
    first = start_server(
        tmp_path / "first.log",
        AIRLOCK_TEST_SLOW_MODEL=LONG,
        AIRLOCK_TEST_LEASE_SECONDS="2",
        AIRLOCK_SWEEP_SECONDS="1",
    )
    try:
        with httpx.Client(base_url=first.url, timeout=60) as client:
            body = {"agent": "slow", "message": "hello"}
            thread_id = client.post("/agent/chat", json=body, headers=alice).json()["thread_id"]
            for word in ("one", "two"):
                body = {"agent": "crash", "message": word, "thread_id": thread_id, "mode": "queue"}
                assert client.post("/agent/chat", json=body, headers=alice).status_code == 202
        wait_for(
            "the model step to stream",
            lambda: StreamFrame.objects.filter(run__thread_id=thread_id, kind="text").exists(),
        )
        first.process.kill()  # SIGKILL: the run's driver dies mid model step
        first.process.wait()
        second = start_server(
            tmp_path / "second.log", AIRLOCK_TEST_LEASE_SECONDS="2", AIRLOCK_SWEEP_SECONDS="1"
        )
        try:
            wait_for(
                "three completed runs",
                lambda: (
                    Run.objects.filter(thread_id=thread_id, status=RunStatus.COMPLETED).count() == 3
                ),
            )
        finally:
            second.stop()
    finally:
        first.stop()
    assert_started_in_order_once(thread_id, ["hello", "one", "two"])
