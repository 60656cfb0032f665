"""A transaction of one statement sends no ``BEGIN`` / ``COMMIT`` (issue 18): PostgreSQL makes one
statement atomic by itself, and psycopg would send each as a round trip of its own
(``rows.one_statement``). Counted at the driver, in real transactions (``transaction=True``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import psycopg
import pytest
from django.db import connection

from agent_core.choices import RunStatus
from agent_core.engine import runs, sql
from agent_core.engine.dispatch import set_runner
from agent_core.runner.inline import InlineRunner
from tests.conftest import ALICE, REFUND

pytestmark = pytest.mark.django_db(transaction=True)

READ = '/call lookup_order {"order_id": "A-1001"}'


@contextmanager
def sent() -> Iterator[list[str]]:
    """What this thread's connection sends: each statement (``[auto]`` when sent in autocommit)
    and each command psycopg sends on its own (``BEGIN``, ``COMMIT``, ``ROLLBACK``)."""
    log: list[str] = []
    command = psycopg.Connection._exec_command

    def spy(self: psycopg.Connection[Any], sent: bytes, *args: Any, **kwargs: Any) -> Any:
        log.append(bytes(sent).decode())
        return command(self, sent, *args, **kwargs)

    def statement(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        log.append(("[auto] " if connection.get_autocommit() else "") + sql)
        return execute(sql, params, many, context)

    with mock.patch.object(psycopg.Connection, "_exec_command", spy):
        with connection.execute_wrapper(statement):
            yield log


def test_a_new_thread_starts_in_one_statement_without_begin_or_commit(shop: None) -> None:
    set_runner(type("Idle", (), {"dispatch": lambda self, run_id, kind=None: None})())
    try:
        with sent() as log:
            runs.start_run(agent="support", message="hi", actor=ALICE)
    finally:
        set_runner(None)
    assert len(log) == 1 and log[0].startswith("[auto] " + sql.START_RUN[:40]), log


def test_a_model_step_proposing_a_read_is_recorded_without_begin_or_commit(shop: None) -> None:
    set_runner(InlineRunner(workers=0))  # driven in this thread, after each commit
    try:
        with sent() as log:
            run = runs.start_run(agent="support", message=READ, actor=ALICE)
    finally:
        set_runner(None)
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    alone = [line for line in log if line.startswith("[auto] ")]
    # The start; the model step's record (which locks the run itself) and the read (the tool's
    # own ``SELECT``), each in autocommit.
    assert len(alone) == 3, log
    assert alone[1].startswith("[auto] " + sql.RECORD_MODEL_STEP_LOCKING[:40]), alone
    # Three transactions of more than one statement: the claim with the first step's opening;
    # the read's record with the next step's opening; the answer's record with the run's end.
    assert log.count("BEGIN") == log.count("COMMIT") == 3, log


def test_a_model_step_with_a_call_waiting_on_a_person_is_recorded_in_a_transaction(
    shop: None,
) -> None:
    # The read runs first, but the refund waits on a person: the gate records its request (the
    # approver's notifications) with the step, so the record is not one statement any more.
    set_runner(InlineRunner(workers=0))
    try:
        with sent() as log:
            run = runs.start_run(agent="support", message=f"{READ}\n{REFUND}", actor=ALICE)
    finally:
        set_runner(None)
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING
    [record] = [line for line in log if sql.RECORD_MODEL_STEP_LOCKING[:40] in line]
    assert not record.startswith("[auto] "), log
