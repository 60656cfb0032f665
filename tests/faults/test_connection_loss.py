"""A database restart in the middle of a step is not the step's failure (SPEC §20).

The tools of ``tests.faults.agents`` end their own session once, as a PostgreSQL restart does. An
atomic tool's transaction rolls back with its effect: the step runs again once the sweeper
re-drives the run, and the effect happens exactly once. A plain tool's effect may be out: its
call is left ``executing`` for ``recover`` to settle (here: ``in_doubt``, a person says).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import OperationalError

from agent_core.choices import CallStatus, RunStatus
from agent_core.models import Run
from agent_core.runner.inline import InlineRunner
from agent_core.runner.sweep import sweep
from demo.models import MailerSend, Refund
from tests.conftest import calls_of
from tests.faults.conftest import lease_runs_out

pytestmark = pytest.mark.django_db(transaction=True)

REFUND = '/call refund_through_restart {"order_id": "A-1001", "amount": "5.00"}'
MAIL = '/call mail_through_restart {"campaign_id": "spring-sale"}'


def _driven_into_the_restart(run: Run) -> None:
    # The lost connection escapes the step: the runner's task (or thread) ends, the lease stays.
    with pytest.raises(OperationalError):
        InlineRunner(workers=0).drive(run.pk)


def _swept_after_the_lease(run: Run) -> None:
    lease_runs_out(run)
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
    run.refresh_from_db()  # the tool was told the lease of the driver that ran it (the sweeper's)
    assert call.result is not None and call.result["lease_token"] == run.lease_token


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
