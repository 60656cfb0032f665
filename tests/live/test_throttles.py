"""Throttles count across processes: two real daphne processes share one Redis cache."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.live.server import Server, start_server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture(scope="module")
def throttled(
    django_db_setup: None, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Server, Server]]:
    """Two servers whose chat and decision rates are 3 a minute."""
    logs = tmp_path_factory.mktemp("throttled")
    first = start_server(
        logs / "a.log", AIRLOCK_TEST_CHAT_RATE="3/min", AIRLOCK_TEST_DECISION_RATE="3/min"
    )
    try:
        second = start_server(
            logs / "b.log", AIRLOCK_TEST_CHAT_RATE="3/min", AIRLOCK_TEST_DECISION_RATE="3/min"
        )
    except Exception:
        first.stop()
        raise
    yield first, second
    first.stop()
    second.stop()


def test_an_actor_is_throttled_whichever_process_it_reaches(shop, throttled):
    actor = {"X-Actor-Id": f"user:{uuid.uuid4()}"}
    chat = {"agent": "support", "message": "hello"}
    decision = {"tool_call_id": "tc_nope"}
    with httpx.Client(timeout=60) as client:

        def post(server: Server, path: str, body: dict[str, str]) -> httpx.Response:
            return client.post(f"{server.url}/agent/{path}", json=body, headers=actor)

        a, b = throttled
        assert [post(s, "chat", chat).status_code for s in (a, b, a)] == [202, 202, 202]
        refused = post(b, "chat", chat)
        assert refused.status_code == 429 and refused.json()["code"] == "throttled"
        assert 1 <= int(refused.headers["Retry-After"]) <= 60
        approve = [post(s, "tool-call/approve", decision).status_code for s in (b, a, b)]
        assert approve == [404, 404, 404]
        late = post(a, "tool-call/reject", decision)
        assert late.status_code == 429 and "Retry-After" in late.headers
