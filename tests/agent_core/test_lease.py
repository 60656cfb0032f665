"""The lease: one driver per run, taken in the step's opening transaction, passed on by token."""

from __future__ import annotations

import pytest
from django.db import transaction

from agent_core.choices import CallStatus, RunStatus
from agent_core.engine import calls, leases
from agent_core.engine.dispatch import NextStep
from agent_core.engine.leases import Claim
from agent_core.exceptions import LeaseLost
from agent_core.models import Run, Step
from agent_core.runner import loop
from agent_core.runner.plan import RunTool
from approvals import services as port
from tests.conftest import ALICE, REFUND, calls_of


@pytest.fixture
def approved(turn) -> Run:
    """A run whose refund was just approved: queued, its tool step not yet taken by anyone
    (the decision's dispatch is not run here)."""
    run = turn(REFUND)
    [call] = calls_of(run)
    port.approve(call.pk, actor=ALICE)
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED
    return run


def test_a_passed_token_takes_the_lease_over_and_a_stale_one_backs_off(approved):
    first = leases.acquire(approved.pk, "worker-1")
    assert first is not None
    assert leases.acquire(approved.pk, "worker-2") is None  # live: back off
    assert leases.acquire(approved.pk, "worker-2", passed=first.token - 1) is None
    second = leases.acquire(approved.pk, "worker-2", passed=first.token)
    assert second is not None and second.token == first.token + 1
    [call] = calls_of(approved)
    with pytest.raises(LeaseLost), transaction.atomic():  # the first driver is fenced out
        calls.claim_call(first, call.pk)
    assert calls_of(approved)[0].status == CallStatus.APPROVED


def test_claim_step_takes_the_lease_in_the_transaction_that_plans(approved):
    found = loop.claim_step(Claim(approved.pk, "worker-1"), only="agent.llm")  # atomic: here
    assert found is not None
    lease, opened = found
    assert isinstance(opened, loop.Opened) and isinstance(opened.step, RunTool)
    approved.refresh_from_db()
    assert (approved.lease_owner, approved.lease_token) == ("worker-1", lease.token)
    assert loop.claim_step(Claim(approved.pk, "worker-2")) is None  # held: back off
    # A task on another queue hands the step on untouched, keeping the lease for the next task.
    handed = loop.claim_step(Claim(approved.pk, "worker-2", passed=lease.token), only="agent.tool")
    assert handed is not None and handed[1] == loop.OtherQueue("agent.llm")


def test_a_broken_journal_fails_the_run_though_the_claim_rolled_back(approved):
    Step.objects.create(run=approved, name="llm:3", status="completed")  # code never reaches it
    found = loop.claim_step(Claim(approved.pk, "worker-1"))
    assert found is not None and found[1] == NextStep.STOP
    approved.refresh_from_db()
    assert approved.status == RunStatus.FAILED and approved.error_code == "replay_diverged"
    assert approved.lease_owner == ""
    assert calls_of(approved)[0].status == CallStatus.FAILED
