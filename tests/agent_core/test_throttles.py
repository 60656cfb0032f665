"""The API's safety net: DRF throttles per actor on chat and decisions, and the limits' checks."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from agent_core.checks import check_limits
from agent_core.models import Run

pytestmark = pytest.mark.django_db

DECISIONS = [
    "/agent/tool-call/approve",
    "/agent/tool-call/reject",
    "/agent/tool-call/answer",
    "/agent/tool-call/extend",
]


@pytest.fixture
def rates(settings: Any) -> Any:
    """Low rates, and header actors so that every test acts as actors nobody used before."""

    def set_rates(**rates: str | None) -> None:
        settings.AGENT = {
            **settings.AGENT,
            "THROTTLE_RATES": rates,
            "ACTOR_RESOLVER": "agent_core.actors.HeaderResolver",
            "ALLOW_HEADER_ACTOR": True,
        }

    return set_rates


def _as_someone() -> APIClient:
    return APIClient(headers={"X-Actor-Id": f"user:{uuid.uuid4()}"})


def _chat(client: APIClient) -> Any:
    return client.post("/agent/chat", {"agent": "support", "message": "hello"}, format="json")


def test_chat_past_the_rate_is_429_with_retry_after_and_starts_nothing(shop, rates):
    rates(chat="2/min")
    alice, bob = _as_someone(), _as_someone()
    assert [_chat(alice).status_code for _ in range(2)] == [202, 202]
    refused = _chat(alice)
    assert refused.status_code == 429
    assert refused.json()["code"] == "throttled" and "throttled" in refused.json()["detail"]
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert Run.objects.count() == 2  # the refused request started nothing
    assert _chat(bob).status_code == 202  # per actor: the others go on


@pytest.mark.parametrize("url", DECISIONS)
def test_every_decision_endpoint_is_throttled(rates, url):
    rates(decision="1/min")
    client = _as_someone()
    first = client.post(url, {"tool_call_id": "tc_nope"}, format="json")
    assert first.status_code in (400, 404)  # counted, whatever its answer
    refused = client.post(url, {"tool_call_id": "tc_nope"}, format="json")
    assert refused.status_code == 429 and refused.json()["code"] == "throttled"
    assert int(refused["Retry-After"]) >= 1


def test_decisions_share_one_rate_and_none_turns_a_rate_off(shop, rates):
    rates(decision="2/min", chat=None)
    client = _as_someone()
    codes = [client.post(url, {}, format="json").status_code for url in DECISIONS[:3]]
    assert codes == [400, 400, 429]
    assert [_chat(client).status_code for _ in range(3)] == [202, 202, 202]


def test_the_limits_pass_with_the_project_settings():
    assert check_limits() == []


@override_settings(AGENT={"MAX_TOOL_CALLS_PER_STEP": 0, "THROTTLE_RATES": {"chat": "lots"}})
def test_a_bad_cap_or_rate_is_reported():
    assert [m.id for m in check_limits()] == ["agent_core.E009", "agent_core.E009"]


@override_settings(CACHES={"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}})
def test_a_per_process_cache_is_a_warning_while_throttles_are_on():
    assert [m.id for m in check_limits()] == ["agent_core.W010"]
    with override_settings(AGENT={"THROTTLE_RATES": {"chat": None, "decision": None}}):
        assert check_limits() == []
