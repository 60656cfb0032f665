"""``MAX_TOOL_CALLS_PER_STEP``: the calls of one model reply past the cap are refused."""

from __future__ import annotations

import pytest

from agent_core.choices import CallStatus, RunStatus
from agent_core.models import Message, StreamFrame
from demo.models import CachePurge
from tests.conftest import calls_of

pytestmark = pytest.mark.django_db

PURGE = '/call purge_cache {"path": "/p%d"}'
LOOKUP = '/call lookup_order {"order_id": "A-1001"}'


def test_calls_past_the_default_cap_are_errors_never_cards(turn):
    run = turn("\n".join(PURGE % i for i in range(40)))
    assert run.status == RunStatus.WAITING
    calls = calls_of(run)
    assert len(calls) == 40
    assert [c.status for c in calls[:16]] == [CallStatus.PENDING_APPROVAL] * 16
    assert all(c.status == CallStatus.FAILED for c in calls[16:])
    assert all(c.error.startswith("too_many_tool_calls: at most 16") for c in calls[16:])
    kinds = list(StreamFrame.objects.filter(run=run).values_list("kind", flat=True))
    assert kinds.count("approval-requested") == 16
    assert kinds.count("tool-output-error") == 24


def test_the_model_is_told_and_the_run_goes_on(turn, settings):
    settings.AGENT = {**settings.AGENT, "MAX_TOOL_CALLS_PER_STEP": 2}
    run = turn("\n".join([LOOKUP] * 3 + [PURGE % 1]))
    assert run.status == RunStatus.COMPLETED
    statuses = [c.status for c in calls_of(run)]
    assert statuses == [CallStatus.SUCCEEDED] * 2 + [CallStatus.FAILED] * 2
    assert CachePurge.objects.count() == 0  # the action past the cap never ran
    [results] = Message.objects.filter(thread=run.thread, role="tool")
    refused = [p for p in results.content if p["is_error"]]
    assert len(refused) == 2 and all("too_many_tool_calls" in str(p["output"]) for p in refused)
    final = Message.objects.filter(thread=run.thread).latest("seq")
    assert final.role == "assistant" and "did not succeed" in final.text
