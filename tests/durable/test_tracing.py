"""A durable cycle's spans, from this (web) process and from a Celery worker, share one trace."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_core.choices import RunStatus
from agent_core.models import ToolCall
from agent_core.tracing import run_trace_id
from approvals import services as port
from tests.conftest import ALICE, REFUND, settled, wait_for
from tests.spans import in_memory, read_file

from .conftest import Cluster, start

pytestmark = pytest.mark.slow


def test_spans_of_a_durable_cycle_share_the_runs_trace_id(
    cluster: Cluster, tmp_path: Path, settings
):
    settings.AGENT = {**settings.AGENT, "TRACING": True}
    web = in_memory()
    web.clear()
    worker_spans = tmp_path / "spans.jsonl"
    cluster.worker(AIRLOCK_TEST_SPANS_FILE=str(worker_spans))
    run = start(REFUND)
    wait_for("the run to wait", settled(run.pk, RunStatus.WAITING), cluster)
    call = ToolCall.objects.get(run=run)
    assert port.approve(call.pk, actor=ALICE).result == port.Result.APPLIED  # in this process
    wait_for("the run to complete", settled(run.pk, RunStatus.COMPLETED), cluster)
    wait_for(
        "the worker's end span",
        lambda: "airlock.run.end" in {s["name"] for s in read_file(worker_spans)},
        cluster,
    )

    # Airlock's spans: the MCP SDK traces its own JSON-RPC requests (to the demo's warehouse,
    # which the support agent offers), on the pool's event loop, outside any run.
    remote = [s for s in read_file(worker_spans) if s["scope"] == "airlock"]
    local = [
        s
        for s in web.get_finished_spans()
        if s.context and s.instrumentation_scope and s.instrumentation_scope.name == "airlock"
    ]
    trace_id = run_trace_id(run.pk)
    assert {s["trace_id"] for s in remote} == {trace_id}
    assert {s.context.trace_id for s in local if s.context} == {trace_id}
    worker_names = {s["name"] for s in remote}
    assert {
        "chat demo",
        "execute_tool issue_refund",
        "airlock.step",
        "airlock.run.end",
    } <= worker_names
    assert {"invoke_agent crash", "airlock.decision"} <= {s.name for s in local}
    web.clear()
