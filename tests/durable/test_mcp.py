"""An MCP call is an effect outside the database (SPEC §5, §18): with the durable runner and real
Celery workers, a worker SIGKILLed during it leaves the call ``in_doubt``, never re-run silently;
a ``recover()`` given for the server settles it."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from agent_core.choices import CallStatus, RunStatus
from agent_core.models import Run, ToolCall
from approvals import services as port
from tests.conftest import ALICE, settled, wait_for
from tests.mcp.conftest import reservations

from .conftest import Cluster, start

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("shop")]
REFERENCE = "order-77"


def children(pid: int) -> list[int]:
    """The child processes of ``pid`` (a worker's stdio MCP server)."""
    tasks = Path(f"/proc/{pid}/task").iterdir()
    return [int(c) for t in tasks for c in (t / "children").read_text().split()]


def kill_mid_call(cluster: Cluster, tmp_path: Path, settings: Any, **env: str) -> tuple[Run, Path]:
    """A reservation approved and SIGKILLed with its worker (and the worker's MCP server) while
    the warehouse works on it; another worker then takes the run over."""
    log = tmp_path / "reservations.jsonl"
    env = {"AIRLOCK_TEST_WAREHOUSE_LOG": str(log), **env}
    warehouse = settings.AGENT["MCP_SERVERS"]["warehouse"]
    settings.AGENT = {
        **settings.AGENT,
        "MCP_SERVERS": {"warehouse": {**warehouse, "env": {"DEMO_WAREHOUSE_LOG": str(log)}}},
    }
    cluster.beat()
    first = cluster.worker(AIRLOCK_TEST_WAREHOUSE_DELAY="600", **env)
    args = {"sku": "SKU-1", "quantity": 2, "reference": REFERENCE}
    run = start(f"/call mcp__warehouse__reserve_stock {json.dumps(args)}", agent="support")
    wait_for("the run to park", settled(run.pk, RunStatus.WAITING), cluster)
    [call] = ToolCall.objects.filter(run=run)
    assert (call.kind, call.status) == ("action", CallStatus.PENDING_APPROVAL)
    port.approve(call.pk, actor=ALICE)
    executing = ToolCall.objects.filter(pk=call.pk, status=CallStatus.EXECUTING)
    wait_for("the call to be executing", executing.exists, cluster)
    servers = children(first.pid)
    cluster.kill(first)
    for pid in servers:  # the server dies too: left alone it would reserve 600 s later
        os.kill(pid, signal.SIGKILL)
    cluster.worker(**env)
    return run, log


def test_a_worker_killed_during_an_mcp_call_leaves_it_in_doubt(cluster, tmp_path, settings):
    run, log = kill_mid_call(cluster, tmp_path, settings)
    blocked = Run.objects.filter(pk=run.pk, error_code="side_effect_retry_blocked")
    wait_for("the run to stop on the call in doubt", blocked.exists, cluster)
    [call] = ToolCall.objects.filter(run=run)
    assert call.status == CallStatus.IN_DOUBT
    assert reservations(log, REFERENCE) == []  # not re-run silently
    # A person checks the warehouse and says it did not happen: it runs, once.
    assert port.mark_not_done(call.pk, actor=ALICE).result == "applied"
    wait_for("the run to complete", settled(run.pk, RunStatus.COMPLETED), cluster)
    assert len(reservations(log, REFERENCE)) == 1


def test_the_servers_recover_settles_an_mcp_call_in_doubt(cluster, tmp_path, settings):
    run, log = kill_mid_call(
        cluster,
        tmp_path,
        settings,
        AIRLOCK_TEST_WAREHOUSE_RECOVER="tests.mcp.recovery.reservation_made",
    )
    # recover() found no reservation: the call runs again on the new worker, once.
    wait_for("the run to complete", settled(run.pk, RunStatus.COMPLETED), cluster)
    [call] = ToolCall.objects.filter(run=run)
    assert call.status == CallStatus.SUCCEEDED
    [made] = reservations(log, REFERENCE)
    assert (call.result or {})["reservation_id"] == made["reservation_id"]
