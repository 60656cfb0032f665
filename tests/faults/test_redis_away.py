"""Redis away (the broker, the channel layer, the cache): a committed decision is answered as
made, the API answers 503 with ``Retry-After`` rather than 500, and a stream that attaches
keeps following the run from the table (SPEC §20)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.http import HttpResponse
from django.test import RequestFactory, override_settings
from kombu.exceptions import OperationalError as BrokerError

from agent_core.choices import CallStatus, RunStatus
from agent_core.engine import runs
from agent_core.engine.dispatch import set_runner
from agent_core.middleware import ServiceUnavailableMiddleware
from agent_core.models import Run
from agent_core.runner.inline import InlineRunner
from agent_core.streams import fanout
from approvals.models import DecisionAttempt
from tests.approvals.rest import actor, client_for
from tests.conftest import calls_of, refund

# Nothing listens on port 9 (discard): a Redis that is away.
AWAY = "redis://127.0.0.1:9/0"


class _BrokerAway:
    """A durable runner's dispatch while Redis is down: ``send_task`` gives up with kombu's
    error (the broker is the edge we do not own)."""

    def dispatch(self, run_id: str, kind: Any = None) -> None:
        raise BrokerError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")


@pytest.fixture
def parked(shop: None, people: Any) -> Iterator[Run]:
    set_runner(InlineRunner(workers=0))
    run = runs.start_run(agent="support", message=refund(10), actor=actor(people["alice"]))
    set_runner(_BrokerAway())
    try:
        yield run
    finally:
        set_runner(None)


@pytest.mark.django_db(transaction=True)
def test_a_decision_committed_while_the_broker_is_away_is_answered_as_made(
    parked: Run, people: Any
) -> None:
    [call] = calls_of(parked)
    response = client_for(people["alice"]).post(
        "/agent/tool-call/approve", {"tool_call_id": call.pk}, format="json"
    )
    assert (response.status_code, response.json()["status"]) == (200, "approved")
    [call] = calls_of(parked)
    assert call.status == CallStatus.APPROVED
    assert DecisionAttempt.objects.get(tool_call_id=call.pk).outcome == "applied"
    parked.refresh_from_db()
    assert parked.status == RunStatus.QUEUED  # the sweeper re-drives it once its lease is out


@pytest.mark.django_db(transaction=True)
def test_the_api_answers_503_with_retry_after_while_the_cache_is_away(
    parked: Run, people: Any
) -> None:
    [call] = calls_of(parked)
    cache = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": AWAY}
    }
    with override_settings(CACHES=cache):
        response = client_for(people["alice"]).post(
            "/agent/tool-call/approve", {"tool_call_id": call.pk}, format="json"
        )
    assert response.status_code == 503
    assert int(response["Retry-After"]) >= 1
    assert response.json()["code"] == "service_unavailable"
    assert calls_of(parked)[0].status == CallStatus.PENDING_APPROVAL  # nothing changed


async def _attached_while_redis_is_away() -> list[dict[str, Any]]:
    async with fanout.subscribe(f"run_away_{uuid.uuid4().hex}", 60) as inbox:
        return await asyncio.wait_for(inbox.take(), 10)


def test_a_follower_attached_while_redis_is_away_is_told_to_read_the_table() -> None:
    layers = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [AWAY]},
        }
    }
    with override_settings(CHANNEL_LAYERS=layers):
        assert asyncio.run(_attached_while_redis_is_away()) == [fanout.LOST]


def test_a_page_whose_view_finds_a_service_away_answers_503() -> None:
    middleware = ServiceUnavailableMiddleware(lambda request: HttpResponse())
    request = RequestFactory().post("/console/inbox/decide")
    response = middleware.process_exception(request, redis.ConnectionError("Connection refused"))
    assert response is not None and response.status_code == 503
    assert int(response["Retry-After"]) >= 1
    assert middleware.process_exception(request, ValueError("a bug")) is None  # still a 500
