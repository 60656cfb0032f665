"""An atomic tool (its effects live in this database) that raises: nothing it wrote stays, and
its call is recorded failed, once, with the error the model sees (SPEC §5). The tool runs in the
claim's transaction without a savepoint of its own; its failure is recorded after that
transaction rolled back (``tool_step.AtomicToolRaised``)."""

from __future__ import annotations

from typing import Any

import pytest

from agent_core.choices import CallStatus, RunStatus
from agent_core.engine import runs
from agent_core.engine.dispatch import set_runner
from agent_core.models import Message, Run, Step, StreamFrame
from agent_core.runner.inline import InlineRunner
from approvals import services as port
from demo.models import CachePurge
from tests.conftest import ALICE, OPS_AGENTS, calls_of

FAILING = '/call purge_then_fail {"path": "/shop"}'


def _failed_once(run: Run) -> None:
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED  # the model was told, and answered
    [call] = calls_of(run)
    assert call.status == CallStatus.FAILED and call.attempts == 1
    assert call.error == "RuntimeError: the edge refused"
    assert not CachePurge.objects.exists()  # its write went with it
    step = Step.objects.get(run=run, name=f"tool:{call.pk}")
    assert step.output == {"status": "failed"}
    announced = StreamFrame.objects.filter(run=run, data__tool_call_id=call.pk)
    kinds = list(announced.values_list("kind", flat=True))
    assert kinds.count("tool-output-error") == 1 and "tool-output-available" not in kinds
    said = Message.objects.filter(thread=run.thread, role="tool").values_list("content", flat=True)
    assert "the edge refused" in str(list(said))


@pytest.mark.django_db
def test_a_raising_atomic_tool_leaves_no_write_and_its_call_failed(
    ops_turn: Any, decide: Any
) -> None:
    run = ops_turn(FAILING)
    [call] = calls_of(run)
    decide(port.approve, call.pk, actor=ALICE)
    _failed_once(run)


@pytest.mark.django_db(transaction=True)
def test_in_real_transactions_too(shop: None, settings: Any) -> None:
    settings.AGENT = {**settings.AGENT, "AGENTS": OPS_AGENTS}
    set_runner(InlineRunner(workers=0))
    try:
        run = runs.start_run(agent="ops", message=FAILING, actor=ALICE)
        [call] = calls_of(run)
        port.approve(call.pk, actor=ALICE)
    finally:
        set_runner(None)
    _failed_once(run)
