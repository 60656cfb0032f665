"""Per-run limits and tool-loop detection (SPEC §16) on the durable runner, with real Celery
workers: the same outcomes as on the inline runner (``tests/agent_core/test_run_limits.py``)."""

from __future__ import annotations

import pytest

from agent_core.choices import CallStatus, RunStatus
from agent_core.models import ToolCall
from tests.conftest import settled, wait_for

from .conftest import Cluster, assert_frames_gapless, start

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("shop")]


def test_limits_and_a_loop_end_runs_on_workers(cluster: Cluster) -> None:
    cluster.worker()
    stepping, wandering, looping, obeying = (
        start(message, agent="looper")
        for message in ("wander 1", "wander 4", "loop", "loop, but obey")
    )
    for run, status in (
        (stepping, RunStatus.FAILED),
        (wandering, RunStatus.FAILED),
        (looping, RunStatus.FAILED),
        (obeying, RunStatus.COMPLETED),
    ):
        wait_for(f"{run.pk} to end", settled(run.pk, status), cluster)
        run.refresh_from_db()
        assert_frames_gapless(run.pk)
    assert stepping.error_code == wandering.error_code == "run_limit_exceeded"
    assert looping.error_code == "tool_loop_detected"

    def statuses(run_id: str) -> list[str]:
        calls = ToolCall.objects.filter(run_id=run_id).order_by("requested_at", "position")
        return [c.status for c in calls]

    assert statuses(stepping.pk) == [CallStatus.SUCCEEDED] * 4
    assert statuses(wandering.pk) == [CallStatus.SUCCEEDED] * 4 + [CallStatus.FAILED] * 4
    assert statuses(looping.pk) == [CallStatus.SUCCEEDED] * 3 + [CallStatus.FAILED]
    assert statuses(obeying.pk) == [CallStatus.SUCCEEDED] * 3
