"""A message queued on a busy thread while its run ends, with real threads on committed
transactions: the run's end and the queuer are serialized on the run's lock, so the message is
either seen by the end (and its turn started there) or finds the thread idle and starts at once —
never left queued on an idle thread that nothing would start it from."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, transaction

from agent_core.choices import QueuedStatus, RunStatus
from agent_core.conversation import turns
from agent_core.engine import runs
from agent_core.engine.leases import lock_run
from agent_core.models import QueuedMessage, Run, Thread
from tests.conftest import ALICE, REFUND, WAIT_SECONDS, settled, wait_for


def _pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def _waits_for_a_lock(pids: list[int]) -> bool:
    """Whether the (recorded) backend waits for a row lock; read on the test's own connection,
    whose every statement sees the activity as it is now."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = ANY(%s)", [pids])
        return any(row[0] == "Lock" for row in cursor.fetchall())


def _in_thread(target: Callable[[], None], pids: list[int], done: threading.Event) -> Any:
    def run() -> None:
        try:
            pids.append(_pid())
            target()
        finally:
            done.set()
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.django_db(transaction=True)
def test_a_message_queued_while_the_run_ends_is_never_stranded(shop, threaded_runner):
    run = runs.start_run(agent="support", message=REFUND, actor=ALICE)
    wait_for("the run to park", settled(run.pk, RunStatus.WAITING))
    holding, ending, inserted, insert_may_commit = (threading.Event() for _ in range(4))
    ender_pid: list[int] = []
    queuer_pid: list[int] = []
    ender_done, queuer_done = threading.Event(), threading.Event()
    outcome: list[Run | turns.Queued] = []

    def end() -> None:
        """What the loop does: the run's lock from its transaction's start, later its end."""
        with transaction.atomic():
            locked = lock_run(run.pk)
            holding.set()
            ending.wait(WAIT_SECONDS)
            runs.end_run(locked, RunStatus.CANCELLED, code="cancelled", message="cancelled")

    def pause_after_queueing(execute: Any, sql: str, *args: Any) -> Any:
        result = execute(sql, *args)
        if sql.startswith(f'INSERT INTO "{QueuedMessage._meta.db_table}"'):
            inserted.set()
            insert_may_commit.wait(WAIT_SECONDS)
        return result

    def queue() -> None:
        with connection.execute_wrapper(pause_after_queueing):
            outcome.append(
                turns.start_turn(
                    agent="support",
                    message="later",
                    actor=ALICE,
                    thread_id=run.thread_id,
                    mode=turns.Mode.QUEUE,
                )
            )

    ender = _in_thread(end, ender_pid, ender_done)
    holding.wait(WAIT_SECONDS)
    queuer = _in_thread(queue, queuer_pid, queuer_done)
    # The queuer either waits for the run's lock, or has queued its message under the thread's.
    wait_for(
        "the queuer to wait or queue", lambda: inserted.is_set() or _waits_for_a_lock(queuer_pid)
    )
    ending.set()
    # The end either waits for the thread's lock the queuer holds, or has committed.
    wait_for("the end to wait or end", lambda: ender_done.is_set() or _waits_for_a_lock(ender_pid))
    insert_may_commit.set()
    ender.join(WAIT_SECONDS)
    queuer.join(WAIT_SECONDS)
    assert ender_done.is_set() and queuer_done.is_set() and len(outcome) == 1
    thread = Thread.objects.get(pk=run.thread_id)
    stranded = QueuedMessage.objects.filter(thread=thread, status=QueuedStatus.QUEUED)
    assert not (thread.active_run_id is None and stranded.exists()), "queued on an idle thread"
    started = Run.objects.filter(thread=thread).order_by("created_at")
    assert [r.messages.filter(role="user").get().text for r in started] == [REFUND, "later"]
