"""Per-run limits and tool-loop detection (SPEC §16) on the inline runner; the durable runner's
are in ``tests/durable/test_run_limits.py``. The ``looper`` agent (``tests/durable/agents.py``)
allows 4 model steps, 6 calls and 3 equal calls in a row."""

from __future__ import annotations

import pytest

from agent_core.checks import check_limits
from agent_core.choices import CallStatus, RunStatus
from agent_core.models import Message, Run
from tests.conftest import calls_of

pytestmark = pytest.mark.django_db


def looper(turn, message: str) -> Run:
    return turn(message, agent="looper")


def test_past_the_step_limit_the_run_fails(turn):
    run = looper(turn, "wander 1")
    assert (run.status, run.error_code) == (RunStatus.FAILED, "run_limit_exceeded")
    assert "4 model steps" in run.error_message
    assert [c.status for c in calls_of(run)] == [CallStatus.SUCCEEDED] * 4


def test_past_the_call_limit_the_run_fails_before_those_calls_run(turn):
    run = looper(turn, "wander 4")
    assert (run.status, run.error_code) == (RunStatus.FAILED, "run_limit_exceeded")
    statuses = [c.status for c in calls_of(run)]
    assert statuses == [CallStatus.SUCCEEDED] * 4 + [CallStatus.FAILED] * 4


def test_a_loop_is_told_once_then_ends_the_run(turn):
    run = looper(turn, "loop")
    assert (run.status, run.error_code) == (RunStatus.FAILED, "tool_loop_detected")
    # Three calls, the model told, a fourth call that never ran.
    statuses = [c.status for c in calls_of(run)]
    assert statuses == [CallStatus.SUCCEEDED] * 3 + [CallStatus.FAILED]
    notes = [
        p["output"]["note"]
        for m in Message.objects.filter(thread=run.thread, role="tool")
        for p in m.content
        if isinstance(p["output"], dict) and "note" in p["output"]
    ]
    assert len(notes) == 1 and "3 times in a row" in notes[0]


def test_a_model_told_of_its_loop_may_answer(turn):
    run = looper(turn, "loop, but obey")
    assert run.status == RunStatus.COMPLETED
    assert len(calls_of(run)) == 3
    final = Message.objects.filter(thread=run.thread).latest("seq")
    assert "going round in circles" in final.text


def test_the_agent_settings_are_the_defaults(turn, settings):
    settings.AGENT = {**settings.AGENT, "MAX_STEPS_PER_RUN": 1}
    run = turn('/call lookup_order {"order_id": "A-1001"}')
    assert (run.status, run.error_code) == (RunStatus.FAILED, "run_limit_exceeded")


def test_a_limit_that_is_not_a_positive_integer_is_reported(settings):
    settings.AGENT = {**settings.AGENT, "TOOL_LOOP_LIMIT": 0}
    [error] = check_limits()
    assert error.id == "agent_core.E009" and "TOOL_LOOP_LIMIT" in error.msg
