"""The statements the loop sends for a cycle (issue 18): a step opened in its predecessor's record
is planned from what that record wrote, without reading the run again; a run's end, its thread's
release and its last frames are one statement; a tool's record, its claim and a model step's
record without calls for the gate take the run's lock in the statement that writes them."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agent_core.choices import RunStatus
from agent_core.engine import sql
from approvals import services as port
from tests.conftest import ALICE, REFUND, calls_of

pytestmark = pytest.mark.django_db

READ = '/call lookup_order {"order_id": "A-1001"}'


def statements(queries: CaptureQueriesContext) -> list[str]:
    """What was sent, less the savepoints the test's own transaction turns commits into."""
    return [q["sql"] for q in queries.captured_queries if "SAVEPOINT" not in q["sql"]]


def run_reads(sent: list[str]) -> int:
    """The reads of a run with its journal and calls (``sql.READ_RUN``, locked or not)."""
    return sum(1 for statement in sent if statement.startswith(sql.READ_RUN.split("%(")[0]))


def test_a_read_tool_turn_reads_its_run_once(turn: Any) -> None:
    # Claimed and read once; the read tool's step and the answer's are planned from the records
    # that opened them.
    with CaptureQueriesContext(connection) as queries:
        run = turn(READ)
    assert run.status == RunStatus.COMPLETED
    sent = statements(queries)
    assert run_reads(sent) == 1, sent
    # The last one is the fixture's ``refresh_from_db``. 11, not 14: the read's record and the
    # two model steps' lock the run themselves (``sql.FINISH_CALL_LOCKING``,
    # ``sql.RECORD_MODEL_STEP_LOCKING``: no call of theirs goes to the gate).
    assert len(sent) == 11, sent


def test_an_approved_call_is_recorded_and_answered_without_reading_the_run_again(
    turn: Any, decide: Any
) -> None:
    run = turn(REFUND)
    [call] = calls_of(run)
    with CaptureQueriesContext(connection) as queries:
        decide(port.approve, call.pk, actor=ALICE)
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    sent = statements(queries)
    assert run_reads(sent) == 1, sent  # the claim's, after the decision resumed the run
    # 10, not 14: the decision's settlement queues the run it frees (``sql.SETTLE_CALL``); the
    # refund's claim and the answer's record lock the run themselves (``sql.CLAIM_CALL``,
    # ``sql.RECORD_MODEL_STEP_LOCKING``).
    assert len(sent) == 10, sent


def test_a_second_approved_call_of_the_step_runs_without_reading_the_run_again(turn: Any) -> None:
    # An approved call moves only under the driver's lease: what the step was planned from holds.
    with CaptureQueriesContext(connection) as queries:
        run = turn(f'{READ}\n/call lookup_order {{"order_id": "A-1002"}}')
    assert run.status == RunStatus.COMPLETED
    assert [c.status for c in calls_of(run)] == ["succeeded", "succeeded"]
    assert run_reads(statements(queries)) == 1


def test_a_step_with_a_call_waiting_on_a_person_is_read_again_to_plan(turn: Any) -> None:
    # The pending refund may have been decided while the first read ran: the run is read again
    # to plan the second one (after which the step parks, on the statuses its record read).
    with CaptureQueriesContext(connection) as queries:
        run = turn(f'{READ}\n/call lookup_order {{"order_id": "A-1002"}}\n{REFUND}')
    assert run.status == RunStatus.WAITING
    assert [c.status for c in calls_of(run)] == ["succeeded", "succeeded", "pending_approval"]
    assert run_reads(statements(queries)) == 2
