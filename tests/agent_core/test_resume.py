"""A decision frees its run in the statement that settles the call (``sql.SETTLE_CALL``): the run
goes back to the queue, with a fresh lease deadline and no error, once no other call of it waits
on a person; it is dispatched after commit, once."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from agent_core.choices import CallStatus, RunStatus
from agent_core.engine import sql
from agent_core.engine.dispatch import NextStep, set_runner
from agent_core.models import Run
from approvals import services as port
from tests.conftest import ALICE, calls_of

pytestmark = pytest.mark.django_db

TWO_ACTIONS = (
    '/call issue_refund {"order_id": "A-1001", "amount": 5}\n/call purge_cache {"path": "/orders"}'
)


class Recording:
    """A runner that drives nothing: it keeps what was dispatched."""

    def __init__(self) -> None:
        self.dispatched: list[tuple[str, NextStep | None]] = []

    def dispatch(self, run_id: str, kind: NextStep | None = None) -> None:
        self.dispatched.append((run_id, kind))


def test_the_last_decision_queues_the_run_and_dispatches_it_once(turn, decide):
    run = turn(TWO_ACTIONS)
    first, second = calls_of(run)
    Run.objects.filter(pk=run.pk).update(error_code="stale", error_message="stale")
    runner = Recording()
    set_runner(runner)
    try:
        decide(port.reject, first.pk, actor=ALICE, reason="no")
        waiting = Run.objects.get(pk=run.pk)
        # The other call still waits on a person: the run waits, untouched, and nothing runs.
        assert (waiting.status, waiting.error_code) == (RunStatus.WAITING, "stale")
        assert waiting.lease_expires_at is None and runner.dispatched == []
        before = timezone.now()
        decide(port.approve, second.pk, actor=ALICE)
    finally:
        set_runner(None)
    queued = Run.objects.get(pk=run.pk)
    assert queued.status == RunStatus.QUEUED
    assert (queued.error_code, queued.error_message, queued.lease_owner) == ("", "", "")
    assert queued.lease_expires_at is not None
    assert queued.lease_expires_at - before >= timedelta(seconds=25)  # LEASE_SECONDS ahead
    assert runner.dispatched == [(run.pk, NextStep.TOOL)]  # the approved purge runs next
    assert calls_of(run)[1].status == CallStatus.APPROVED


def test_a_decision_frees_its_run_as_every_other_way_does():
    """``SETTLE_CALL`` spells out what a freed run empties; ``runs.resume_if_unblocked`` reads
    ``FREED_CLEARS``: the same columns."""
    freeing = r"(\w+) = CASE WHEN status = 'waiting' AND \(SELECT unblocked FROM u\) THEN ''"
    assert set(re.findall(freeing, sql.SETTLE_CALL)) == set(sql.FREED_CLEARS)
