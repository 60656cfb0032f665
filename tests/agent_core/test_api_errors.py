"""Issue #12: inputs that used to reach a 500 or an HTML page are 4xx JSON ``{code, detail}``
on every path under ``/agent/``, and change nothing (in process, DRF's test client)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.test import Client

from agent_core.choices import CallStatus
from agent_core.models import Run, Thread
from approvals.models import DecisionAttempt
from tests.conftest import REFUND, calls_of

pytestmark = pytest.mark.django_db

ALICE = {"X-Actor-Id": "user:alice"}
DECISIONS = ["approve", "reject", "answer", "extend"]


@pytest.fixture(autouse=True)
def header_actors(settings: Any) -> None:
    settings.AGENT = {
        **settings.AGENT,
        "ACTOR_RESOLVER": "agent_core.actors.HeaderResolver",
        "ALLOW_HEADER_ACTOR": True,
    }


@pytest.fixture
def client() -> Client:
    return Client(enforce_csrf_checks=True)


def assert_json_error(response: Any, status: int, code: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"].startswith("application/json"), response.content[:300]
    body: dict[str, Any] = response.json()
    assert "code" in body and "detail" in body
    if code is not None:
        assert body["code"] == code, body
    return body


def post_json(client: Client, url: str, body: str | bytes) -> Any:
    return client.post(url, body, content_type="application/json", headers=ALICE)


@pytest.mark.parametrize("action", DECISIONS)
def test_a_body_over_djangos_upload_limit_is_413_body_too_large(client, action):
    big = b'{"tool_call_id": "' + b"x" * (django_settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1) + b'"}'
    assert_json_error(post_json(client, f"/agent/tool-call/{action}", big), 413, "body_too_large")


@pytest.mark.parametrize("depth", [70, 1000, 30_000])
def test_deeply_nested_json_is_400(client, depth):
    body = '{"tool_call_id": "tc_x", "args": ' + "[" * depth + "]" * depth + "}"
    assert_json_error(post_json(client, "/agent/tool-call/approve", body), 400)
    assert_json_error(post_json(client, "/agent/chat", body), 400)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/agent/runs/%00"),
        ("get", "/agent/threads/%00"),
        ("delete", "/agent/threads/%00"),
        ("post", "/agent/chat/%00/cancel"),
        ("get", "/agent/chat/%00/stream"),
        ("get", "/agent/runs/" + "r" * 200),
    ],
)
def test_a_nul_or_impossible_id_in_the_path_is_a_json_404(client, method, path):
    assert_json_error(getattr(client, method)(path, headers=ALICE), 404, "not_found")


def test_a_nul_in_edited_args_or_an_answer_is_400_and_changes_nothing(turn, client):
    [call] = calls_of(turn(REFUND))
    question = calls_of(turn('/call ask_user {"question": "Which order?"}'))[0]
    edited = {"tool_call_id": call.pk, "args": {"order_id": "A-1001\u0000", "amount": 5}}
    answered = {"tool_call_id": question.pk, "answer": {"answer": "A\u0000"}}
    assert_json_error(post_json(client, "/agent/tool-call/approve", json.dumps(edited)), 400)
    assert_json_error(post_json(client, "/agent/tool-call/answer", json.dumps(answered)), 400)
    call.refresh_from_db()
    question.refresh_from_db()
    assert call.status == CallStatus.PENDING_APPROVAL
    assert question.status == CallStatus.PENDING_INPUT
    assert not DecisionAttempt.objects.exists()


# JSON's own escape for a lone surrogate: valid JSON, text no UTF-8 column can hold (issue #35).
LONE = "\\ud800"


def test_a_lone_surrogate_anywhere_in_a_body_is_400_and_changes_nothing(turn, client):
    [call] = calls_of(turn(REFUND))
    question = calls_of(turn('/call ask_user {"question": "Which order?"}'))[0]
    bodies = {
        "/agent/tool-call/approve": [
            f'{{"tool_call_id": "{call.pk}", "args": {{"order_id": "A-1001{LONE}", "amount": 5}}}}',
            f'{{"tool_call_id": "{call.pk}", "args": {{"order_id{LONE}": "A-1001", "amount": 5}}}}',
        ],
        "/agent/tool-call/reject": [f'{{"tool_call_id": "{call.pk}", "reason": "no{LONE}"}}'],
        "/agent/tool-call/answer": [
            f'{{"tool_call_id": "{question.pk}", "answer": {{"answer": "A{LONE}"}}}}'
        ],
        "/agent/chat": [f'{{"agent": "support", "message": "hi{LONE}"}}'],
        "/agent/ui-chat": [
            '{"id": "chat1", "messages": [{"id": "m1", "role": "user", '
            f'"parts": [{{"type": "text", "text": "hi{LONE}"}}]}}]}}'
        ],
    }
    for url, sent in bodies.items():
        for body in sent:
            assert_json_error(post_json(client, url, body), 400)
    call.refresh_from_db()
    question.refresh_from_db()
    assert call.status == CallStatus.PENDING_APPROVAL
    assert question.status == CallStatus.PENDING_INPUT
    assert not DecisionAttempt.objects.exists()
    assert Run.objects.count() == 2


# The stream reads on live's reader threads, each with its own connection: the run must be
# committed for them to see it.
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("query", "headers"),
    [("?after=%C2%B2", {}), ("", {"Last-Event-ID": "\xb2"}), ("?after=-1", {})],
)
def test_a_bad_stream_cursor_is_a_json_400(turn, client, query, headers):
    run = turn(REFUND)
    response = client.get(f"/agent/chat/{run.pk}/stream{query}", headers={**ALICE, **headers})
    assert_json_error(response, 400, "invalid")


@pytest.mark.parametrize("method", ["get", "post", "put", "delete"])
@pytest.mark.parametrize("path", ["/agent/nope", "/agent/", "/agent/chat/", "/agent/runs/a/b"])
def test_an_unknown_path_under_agent_is_a_json_404_whatever_the_method(client, method, path):
    assert_json_error(getattr(client, method)(path, headers=ALICE), 404, "not_found")


@pytest.mark.parametrize("method", ["post", "put", "delete"])
def test_another_method_on_the_stream_is_a_json_405_not_a_csrf_page(turn, client, method):
    run = turn(REFUND)
    response = getattr(client, method)(f"/agent/chat/{run.pk}/stream", headers=ALICE)
    assert_json_error(response, 405, "method_not_allowed")
    assert response["Allow"] == "GET"


@pytest.mark.parametrize("url", ["/agent/runs", "/agent/threads"])
def test_an_invalid_page_cursor_is_400(client, url):
    body = assert_json_error(client.get(f"{url}?cursor=zzz", headers=ALICE), 400, "invalid")
    assert "cursor" in body["errors"]


@pytest.mark.parametrize(
    "path", ["/agent/runs", "/agent/tool-call/approve", "/agent/chat/run_x/stream"]
)
def test_every_401_names_how_to_authenticate(client, path):
    response = client.get(path)
    assert_json_error(response, 401, "not_authenticated")
    assert response["WWW-Authenticate"] == "Token"


def test_nothing_was_written_by_any_refusal(client):
    post_json(client, "/agent/chat", '{"agent": "support", "message": "hi\\u0000"}')
    assert not Run.objects.exists() and not Thread.objects.exists()


def test_agent_answers_json_to_a_browser_by_default(turn, settings):
    """Issue #35: ``Accept: text/html`` had DRF's browsable API, and anonymous 401s were HTML."""
    browser = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
    run = turn(REFUND)
    anonymous = Client().get("/agent/runs", headers=browser)
    assert_json_error(anonymous, 401, "not_authenticated")
    seen = Client().get(f"/agent/runs/{run.pk}", headers={**browser, **ALICE})
    assert seen.status_code == 200 and seen["Content-Type"] == "application/json"
    # A project opts in to DRF's HTML pages in AGENT.
    settings.AGENT = {
        **settings.AGENT,
        "API_RENDERER_CLASSES": [
            "rest_framework.renderers.JSONRenderer",
            "rest_framework.renderers.BrowsableAPIRenderer",
        ],
    }
    html = Client().get(f"/agent/runs/{run.pk}", headers={**browser, **ALICE})
    assert html.status_code == 200 and html["Content-Type"].startswith("text/html")
