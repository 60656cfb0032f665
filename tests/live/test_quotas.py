"""Quotas over real HTTP: 429 ``quota_exceeded`` with ``Retry-After``; a run over its token
budget ends with ``quota_exceeded``, not a generic failure."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_core.choices import RunStatus
from agent_core.models import Run
from tests.live.conftest import read_all
from tests.live.server import start_server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

QUOTAS = {"RUNS_PER_MINUTE": 3, "PER_AGENT": {"support": {"TOKENS_PER_DAY": 5}}}
DAN = {"X-Actor-Id": "user:dan"}
CAROL = {"X-Actor-Id": "user:carol"}


@pytest.fixture(scope="module")
def limited(
    django_db_setup: None, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[httpx.Client]:
    """A server with quotas: 3 runs a minute per actor, 5 tokens a day on ``support``."""
    log: Path = tmp_path_factory.mktemp("daphne") / "quotas.log"
    server = start_server(log, AIRLOCK_TEST_QUOTAS=json.dumps(QUOTAS))
    with httpx.Client(base_url=server.url, timeout=60) as client:
        yield client
    server.stop()


def test_a_start_over_the_runs_a_minute_is_429_with_retry_after(limited):
    for _ in range(3):
        ok = limited.post("/agent/chat", json={"agent": "live", "message": "3"}, headers=DAN)
        assert ok.status_code == 202
    refused = limited.post("/agent/chat", json={"agent": "live", "message": "3"}, headers=DAN)
    assert refused.status_code == 429
    assert refused.json()["code"] == "quota_exceeded"
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert Run.objects.filter(actor_ref="user:dan").count() == 3


def test_a_run_crossing_its_token_budget_ends_with_quota_exceeded(shop, limited):
    message = '/call lookup_order {"order_id": "A-1001"}'
    started = limited.post(
        "/agent/chat", json={"agent": "support", "message": message}, headers=CAROL
    ).json()
    frames = read_all(limited, started["run_id"], CAROL)
    kinds = [f.kind for f in frames]
    assert "tool-output" in kinds  # the first model step and its tool ran
    assert kinds[-3:] == ["quota-exceeded", "finish", "error"]
    assert frames[-3].data["limit"] == "tokens_per_day"
    assert frames[-2].data == {"kind": "finish", "status": "failed", "error_code": "quota_exceeded"}
    assert frames[-1].data["code"] == "quota_exceeded"
    run = Run.objects.get(pk=started["run_id"])
    assert run.status == RunStatus.FAILED and run.error_code == "quota_exceeded"
    assert run.input_tokens + run.output_tokens > 5
    detail = limited.get(f"/agent/runs/{run.pk}", headers=CAROL).json()
    assert detail["usage"]["output_tokens"] == run.output_tokens
    assert detail["steps"][0]["input_tokens"] == run.input_tokens
    again = limited.post(
        "/agent/chat", json={"agent": "support", "message": "hello"}, headers=CAROL
    )
    assert again.status_code == 429 and again.json()["code"] == "quota_exceeded"
    assert int(again.headers["Retry-After"]) > 3600  # the day's tokens come back in a day
    other_agent = limited.post("/agent/chat", json={"agent": "live", "message": "3"}, headers=CAROL)
    assert other_agent.status_code == 202  # the budget is on ``support`` only
