"""SPEC §17 on the durable runner, with real Celery workers: a skipped question resumes its run
on a worker."""

from __future__ import annotations

import pytest

from agent_core.choices import CallStatus, RunStatus
from agent_core.models import Message, ToolCall
from approvals import services as port
from tests.conftest import ALICE, settled, wait_for

from .conftest import Cluster, assert_frames_gapless, start

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("shop")]


def test_a_skipped_question_resumes_its_run_on_a_worker(cluster: Cluster) -> None:
    cluster.worker()
    run = start('/call ask_user {"question": "Which order?"}', agent="support")
    wait_for("the run to park", settled(run.pk, RunStatus.WAITING), cluster)
    [call] = ToolCall.objects.filter(run=run)
    assert port.skip(call.pk, actor=ALICE) == port.Outcome.APPLIED
    wait_for("the run to complete", settled(run.pk, RunStatus.COMPLETED), cluster)
    call.refresh_from_db()
    assert (call.status, call.reason) == (CallStatus.REJECTED, "skipped")
    [told] = Message.objects.get(run=run, role="tool").content
    assert told["output"].startswith("The user skipped this question")
    assert_frames_gapless(run.pk)
