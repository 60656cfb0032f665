"""A database restart in the middle of a step is not the step's failure (SPEC §20).

The tools of ``tests.faults.agents`` end their own session once, as a PostgreSQL restart does. An
atomic tool's transaction rolls back with its effect: the step runs again once the sweeper
re-drives the run, and the effect happens exactly once. A plain tool's effect may be out: its
call is left ``executing`` for ``recover`` to settle (here: ``in_doubt``, a person says).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import OperationalError
from django.db.models.functions import Now

from agent_core import runs
from agent_core.choices import CallStatus, RunStatus
from agent_core.dispatch import set_runner
from agent_core.models import Run
from agent_core.runner.inline import InlineRunner
from agent_core.runner.sweep import sweep
from approvals import services as port
from demo.models import MailerSend, Refund
from tests.conftest import ALICE, calls_of

pytestmark = pytest.mark.django_db(transaction=True)

REFUND = '/call refund_through_restart {"order_id": "A-1001", "amount": "5.00"}'
MAIL = '/call mail_through_restart {"campaign_id": "spring-sale"}'


class _Unserved:
    """A runner nothing drives yet: the test takes the run's steps itself."""

    def dispatch(self, run_id: str, kind: Any = None) -> None:
        return None


@pytest.fixture
def approved(shop: None, settings: Any) -> Iterator[Any]:
    """Start a turn of the ``outage`` agent, approve its call, and return the run, not driven."""
    settings.AGENT = {
        **settings.AGENT,
        "AGENTS": [*settings.AGENT["AGENTS"], "tests.faults.agents.outage_agent"],
    }

    def start(message: str) -> Run:
        set_runner(InlineRunner(workers=0))
        run = runs.start_run(agent="outage", message=message, actor=ALICE)
        [call] = calls_of(run)
        set_runner(_Unserved())
        port.approve(call.pk, actor=ALICE)
        return run

    try:
        yield start
    finally:
        set_runner(None)


def _driven_into_the_restart(run: Run) -> None:
    # The lost connection escapes the step: the runner's task (or thread) ends, the lease stays.
    with pytest.raises(OperationalError):
        InlineRunner(workers=0).drive(run.pk)


def _swept_after_the_lease(run: Run) -> None:
    Run.objects.filter(pk=run.pk).update(lease_expires_at=Now() - timedelta(seconds=1))
    assert sweep(InlineRunner(workers=0)) == 1


def test_an_atomic_tool_cut_off_runs_again_and_its_effect_happens_once(approved: Any) -> None:
    run = approved(REFUND)
    _driven_into_the_restart(run)
    [call] = calls_of(run)
    assert call.status == CallStatus.APPROVED  # its claim rolled back: not the tool's failure
    assert not Refund.objects.exists()
    _swept_after_the_lease(run)
    run.refresh_from_db()
    [call] = calls_of(run)
    assert (run.status, call.status, call.error) == (RunStatus.COMPLETED, CallStatus.SUCCEEDED, "")
    assert Refund.objects.filter(tool_call_id=call.pk).count() == 1


def test_a_plain_tool_cut_off_leaves_its_call_in_doubt_not_the_run_failed(approved: Any) -> None:
    run = approved(MAIL)
    _driven_into_the_restart(run)
    run.refresh_from_db()
    [call] = calls_of(run)
    assert (run.status, call.status) == (RunStatus.RUNNING, CallStatus.EXECUTING)
    _swept_after_the_lease(run)
    run.refresh_from_db()
    [call] = calls_of(run)
    assert call.status == CallStatus.IN_DOUBT  # no recover(): a person says whether it ran
    assert (run.status, run.error_code) == (RunStatus.WAITING, "side_effect_retry_blocked")
    assert MailerSend.objects.count() == 1
