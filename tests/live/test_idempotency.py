"""Idempotent starts over real HTTP: ``Idempotency-Key`` replays, refuses reuse, starts once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from agent_core.models import IdempotencyKey, Run
from tests.live.conftest import ALICE, BOB, read_all

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

BODY = {"agent": "live", "message": "3"}


def post(client: httpx.Client, key: str, body: dict[str, str], actor=ALICE) -> httpx.Response:
    return client.post("/agent/chat", json=body, headers={**actor, "Idempotency-Key": key})


def test_fifty_concurrent_starts_with_one_key_start_one_run(servers):
    def send(i: int) -> httpx.Response:
        url = servers[i % 2].url  # both servers, one database
        with httpx.Client(base_url=url, timeout=60) as client:
            return post(client, "k-fifty", BODY)

    with ThreadPoolExecutor(50) as pool:
        answers = list(pool.map(send, range(50)))
    assert Run.objects.count() == 1
    run = Run.objects.get()
    accepted = [r for r in answers if r.status_code == 202]
    busy = [r for r in answers if r.status_code == 409]
    assert len(accepted) + len(busy) == 50 and accepted
    assert {r.json()["run_id"] for r in accepted} == {run.pk}
    assert sum(r.headers.get("Idempotency-Status") != "replay" for r in accepted) == 1
    for r in busy:
        assert r.json()["code"] == "run_busy" and int(r.headers["Retry-After"]) >= 1


def test_a_replay_after_completion_answers_the_same_ids_and_starts_nothing(a, b):
    first = post(a, "k-replay", BODY)
    assert first.status_code == 202 and "Idempotency-Status" not in first.headers
    assert read_all(a, first.json()["run_id"], ALICE)[-1].event == "done"
    again = post(b, "k-replay", {"message": "3", "agent": "live"})  # key order does not count
    assert again.status_code == 202 and again.headers["Idempotency-Status"] == "replay"
    assert again.json() == first.json()
    assert Run.objects.count() == 1


def test_the_same_key_with_another_body_is_422_and_changes_nothing(a):
    first = post(a, "k-reuse", BODY)
    assert first.status_code == 202
    other = post(a, "k-reuse", {**BODY, "message": "4"})
    assert other.status_code == 422
    assert other.json()["code"] == "idempotency_key_reused"
    assert Run.objects.count() == 1
    stored = IdempotencyKey.objects.get(key="k-reuse")
    assert stored.response == first.json()


def test_a_key_belongs_to_its_actor(a):
    mine = post(a, "k-shared", BODY)
    theirs = post(a, "k-shared", BODY, actor=BOB)
    assert mine.status_code == theirs.status_code == 202
    assert "Idempotency-Status" not in theirs.headers
    assert mine.json()["run_id"] != theirs.json()["run_id"]


def test_a_refused_start_stores_no_answer_and_a_bad_key_is_400(a):
    refused = post(a, "k-refused", {"agent": "nobody", "message": "hi"})
    assert refused.status_code == 404 and refused.json()["code"] == "agent_not_found"
    assert not IdempotencyKey.objects.exists()
    too_long = post(a, "k" * 300, BODY)
    assert too_long.status_code == 400 and too_long.json()["code"] == "invalid"
    assert Run.objects.count() == 0
