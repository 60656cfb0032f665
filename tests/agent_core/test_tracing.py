"""OpenTelemetry spans (the SDK's in-memory exporter): off by default, GenAI attributes when on,
one trace per run across web and Celery processes."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agent_core.checks import check_tracing
from agent_core.tracing import run_trace_id
from approvals import services as port
from tests.conftest import ALICE, REFUND, calls_of
from tests.spans import in_memory


@pytest.fixture
def spans(settings: Any) -> Iterator[InMemorySpanExporter]:
    exporter = in_memory()
    exporter.clear()
    settings.AGENT = {**settings.AGENT, "TRACING": True}
    yield exporter
    exporter.clear()


@pytest.mark.django_db
def test_off_by_default_nothing_is_recorded(turn, decide):
    exporter = in_memory()
    exporter.clear()
    run = turn(REFUND)
    decide(port.approve, calls_of(run)[0].pk, actor=ALICE)
    assert exporter.get_finished_spans() == ()


@pytest.mark.django_db
def test_a_run_its_steps_model_calls_tool_and_decision_share_the_runs_trace(turn, decide, spans):
    run = turn(REFUND)
    [call] = calls_of(run)
    decide(port.approve, call.pk, actor=ALICE, via="api")
    finished = spans.get_finished_spans()
    names = [s.name for s in finished]
    assert names[0] == "invoke_agent support" and names[-1] == "airlock.run.end"
    assert names.count("chat demo") == 2 and names.count("execute_tool issue_refund") == 1
    assert names.count("airlock.step") == 3 and names.count("airlock.decision") == 1
    assert {s.context.trace_id for s in finished if s.context} == {run_trace_id(run.pk)}

    chat = next(s for s in finished if s.name == "chat demo")
    attributes = dict(chat.attributes or {})
    assert attributes["gen_ai.operation.name"] == "chat"
    assert (attributes["gen_ai.provider.name"], attributes["gen_ai.request.model"]) == (
        "scripted",
        "demo",
    )
    assert isinstance(attributes["gen_ai.usage.input_tokens"], int)
    assert isinstance(attributes["gen_ai.usage.output_tokens"], int)
    tool = next(s for s in finished if s.name.startswith("execute_tool"))
    assert dict(tool.attributes or {})["gen_ai.tool.call.id"] == call.pk
    # The tool ran inside its step's span.
    step = next(
        s
        for s in finished
        if s.context and tool.parent and s.context.span_id == tool.parent.span_id
    )
    assert step.name == "airlock.step"
    decision = dict(next(s for s in finished if s.name == "airlock.decision").attributes or {})
    assert (decision["airlock.decision.outcome"], decision["enduser.id"]) == ("applied", ALICE.ref)


def test_tracing_on_without_opentelemetry_is_a_system_check_error(settings, monkeypatch):
    settings.AGENT = {**settings.AGENT, "TRACING": True}
    assert check_tracing() == []
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert [m.id for m in check_tracing()] == ["agent_core.E012"]
