"""Issue #12: who gets which status, for every endpoint of SPEC §8 and every console page, as
six actors: the owner, a stranger, the approver of the call's role, an approver of another
role, a staff operator and nobody (SPEC §7: unseen is 404, seen but not yours is 403).

The scene (demo policy): alice's refund of 120 waits on finance in one run; her question
waits on her in another. Each cell runs on a fresh scene (decisions and cancels change it).
The stream and the two WebSockets are asked for real: their reads run on ``live.read``'s
threads with their own connections, so their cells commit the scene (``transaction=True``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.test import AsyncClient, Client

from agent_core import access
from agent_core.actors import actor_for_user
from agent_core.models import Run, ToolCall
from config.asgi import application
from tests.conftest import calls_of
from tests.factories import make_user
from tests.lean import lean_stream, session_cookie

pytestmark = pytest.mark.django_db

ACTORS = ["owner", "stranger", "approver", "other_approver", "operator", "anonymous"]


@pytest.fixture
def scene(turn, settings) -> dict[str, Any]:
    settings.AGENT = {**settings.AGENT, "APPROVAL_POLICY": "demo.policy.DemoPolicy"}
    people = {
        "owner": make_user("alice"),
        "stranger": make_user("bob"),
        "approver": make_user("fran", "finance", staff=True),
        "other_approver": make_user("mark", "marketing"),
        "operator": make_user("otto", "operator", staff=True),
    }
    alice = actor_for_user(people["owner"])
    run = turn('/call issue_refund {"order_id": "A-1001", "amount": 120}', actor=alice)
    question_run = turn('/call ask_user {"question": "Which order?"}', actor=alice)
    [call] = calls_of(run)
    [question] = calls_of(question_run)
    return {"people": people, "run": run, "call": call, "question": question}


def _client(scene: dict[str, Any], who: str) -> Client:
    client = Client()
    if who != "anonymous":
        client.force_login(scene["people"][who])
    return client


def _ids(scene: dict[str, Any]) -> dict[str, str]:
    run: Run = scene["run"]
    call: ToolCall = scene["call"]
    question: ToolCall = scene["question"]
    return {"R": run.pk, "T": run.thread_id, "C": call.pk, "Q": question.pk, "QR": question.run_id}


#          owner stranger approver other operator anonymous
API = [
    ("get", "/agent/threads", None, (200, 200, 200, 200, 200, 401)),
    ("get", "/agent/threads/{T}", None, (200, 404, 200, 404, 200, 401)),
    ("delete", "/agent/threads/{T}", None, (409, 404, 403, 404, 403, 401)),
    ("get", "/agent/runs", None, (200, 200, 200, 200, 200, 401)),
    ("get", "/agent/runs/{R}", None, (200, 404, 200, 404, 200, 401)),
    ("get", "/agent/runs/{QR}", None, (200, 404, 404, 404, 200, 401)),
    ("post", "/agent/chat", {"agent": "support", "message": "hi", "thread_id": "{T}"},
     (409, 404, 403, 404, 403, 401)),
    ("post", "/agent/chat/{R}/cancel", None, (202, 404, 403, 404, 202, 401)),
    ("post", "/agent/tool-call/approve", {"tool_call_id": "{C}"}, (403, 404, 200, 404, 403, 401)),
    ("post", "/agent/tool-call/reject", {"tool_call_id": "{C}"}, (403, 404, 200, 404, 403, 401)),
    ("post", "/agent/tool-call/extend", {"tool_call_id": "{C}", "ttl": 900},
     (403, 404, 200, 404, 403, 401)),
    ("post", "/agent/tool-call/answer", {"tool_call_id": "{Q}", "answer": {"answer": "A-1001"}},
     (200, 404, 404, 404, 403, 401)),
    ("get", "/agent/approvals/pending", None, (200, 200, 200, 200, 200, 401)),
    ("get", "/agent/remembered", None, (200, 200, 200, 200, 200, 401)),
    ("get", "/agent/remembered/1", None, (404, 404, 404, 404, 404, 401)),
    ("get", "/agent/schema/", None, (200, 200, 200, 200, 200, 200)),
]  # fmt: skip


@pytest.mark.parametrize(("method", "path", "body", "expected"), API)
@pytest.mark.parametrize("who", ACTORS)
def test_every_api_endpoint_answers_each_actor_as_spec_7_and_8_say(
    scene, who, method, path, body, expected
):
    ids = _ids(scene)
    url = path.format(**ids)
    data = {k: v.format(**ids) if isinstance(v, str) else v for k, v in (body or {}).items()}
    kwargs: dict[str, Any] = {"content_type": "application/json"} if body else {}
    response = getattr(_client(scene, who), method)(url, data or None, **kwargs)
    assert response.status_code == expected[ACTORS.index(who)], response.content[:300]
    if response.status_code >= 400 and not url.startswith("/agent/schema"):
        assert response.json()["code"]


#     owner stranger approver other operator anonymous (True: the handshake is accepted)
LIVE = [
    ("sse", "/agent/chat/{R}/stream", (200, 404, 200, 404, 200, 401)),
    ("sse", "/agent/chat/{QR}/stream", (200, 404, 404, 404, 200, 401)),
    ("lean", "/agent/chat/{R}/stream", (200, 404, 200, 404, 200, 401)),
    ("lean", "/agent/chat/{QR}/stream", (200, 404, 404, 404, 200, 401)),
    ("ws", "/agent/chat/{R}/ws", (True, False, True, False, True, False)),
    ("ws", "/agent/chat/{QR}/ws", (True, False, False, False, True, False)),
    ("ws", "/console/ws/runs/{R}/", (False, False, True, False, True, False)),
    ("ws", "/console/ws/runs/{QR}/", (False, False, False, False, True, False)),
]  # fmt: skip


async def _stream(client: Client, url: str) -> tuple[int, dict[str, str], bytes]:
    """The stream's status, headers and body: for a stream, its first event (``meta``) only."""
    browser = AsyncClient()
    browser.cookies = client.cookies  # the session force_login started
    response = await browser.get(url)
    headers = dict(response.items())
    if not response.streaming:
        return response.status_code, headers, response.content
    events: Any = aiter(response.streaming_content)  # type: ignore[attr-defined]
    try:
        return response.status_code, headers, await anext(events)
    finally:
        await events.aclose()


async def _handshake(client: Client, url: str) -> bool:
    # The project's ASGI stack (origin check, session, routing) without its start-up hook,
    # which would start the inline runner's sweeper in the test process.
    headers = [(b"origin", b"http://localhost"), (b"cookie", session_cookie(client).encode())]
    communicator = WebsocketCommunicator(application.router, url, headers=headers)
    accepted, _ = await communicator.connect(timeout=10)
    await communicator.disconnect()
    return bool(accepted)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("kind", "path", "expected"), LIVE)
@pytest.mark.parametrize("who", ACTORS)
def test_the_stream_and_the_websockets_answer_each_actor(scene, who, kind, path, expected):
    url = path.format(**_ids(scene))
    want = expected[ACTORS.index(who)]
    if kind == "ws":
        assert async_to_sync(_handshake)(_client(scene, who), url) is want
        return
    stream = lean_stream if kind == "lean" else _stream
    status, headers, body = async_to_sync(stream)(_client(scene, who), url)
    assert status == want, body[:300]
    assert headers["X-Frame-Options"] == "DENY"  # the project's middleware ran
    if status == 200:
        assert headers["Content-Type"] == "text/event-stream"
        assert body.startswith(b"event: meta\n")
    else:
        assert headers["Content-Type"] == "application/json"
        assert json.loads(body)["code"] == {401: "not_authenticated", 404: "not_found"}[status]
        assert ("WWW-Authenticate" in headers) is (status == 401)


#  owner stranger approver other operator anonymous (302: to the login page)
# Every logged-in user has the inbox and My requests (what they see there is the API's rule);
# the operators' pages are for staff and console roles (console/access.py).
CONSOLE = [
    ("/console/inbox/", (200, 200, 200, 200, 200, 302)),
    ("/console/mine/", (200, 200, 200, 200, 200, 302)),
    ("/console/calls/{C}/", (200, 404, 200, 404, 200, 302)),
    ("/console/calls/{Q}/", (200, 404, 404, 404, 200, 302)),
    ("/console/in-doubt/", (403, 403, 200, 403, 200, 302)),
    ("/console/remembered/", (403, 403, 200, 403, 200, 302)),
    ("/console/runs/", (403, 403, 200, 403, 200, 302)),
    ("/console/runs/{R}/", (403, 403, 200, 403, 200, 302)),
    ("/console/runs/{QR}/", (403, 403, 404, 403, 200, 302)),
    ("/console/runs/{QR}/fragment/", (403, 403, 404, 403, 200, 302)),
    ("/console/audit/", (403, 403, 200, 403, 200, 302)),
    ("/console/audit.csv", (403, 403, 200, 403, 200, 302)),
    ("/console/metrics/", (403, 403, 200, 403, 200, 302)),
    ("/console/deliveries/", (403, 403, 200, 403, 200, 302)),
]


@pytest.mark.parametrize(("path", "expected"), CONSOLE)
@pytest.mark.parametrize("who", ACTORS)
def test_every_console_page_answers_each_actor(scene, who, path, expected):
    response = _client(scene, who).get(path.format(**_ids(scene)))
    assert response.status_code == expected[ACTORS.index(who)]


#  owner stranger approver other operator anonymous
CONSOLE_POSTS = [
    ("/console/calls/{C}/approve/", (403, 404, 302, 404, 403, 302)),
    ("/console/calls/{Q}/answer/", (400, 404, 404, 404, 400, 302)),
    ("/console/runs/{QR}/cancel/", (403, 403, 404, 403, 302, 302)),
]


@pytest.mark.parametrize(("path", "expected"), CONSOLE_POSTS)
@pytest.mark.parametrize("who", ACTORS)
def test_every_console_form_answers_each_actor(scene, who, path, expected):
    response = _client(scene, who).post(path.format(**_ids(scene)))
    assert response.status_code == expected[ACTORS.index(who)]


@pytest.mark.parametrize("who", ACTORS[:-1])
def test_calls_found_by_their_runs_are_seen_as_their_runs_are(scene, who):
    """``access.in_visible_runs`` (the console's *Waiting on others*) is ``visible_calls``'
    rule asked from the runs' side: the same calls for every actor (every reason a run is seen:
    tests/test_visible_runs.py)."""
    actor = actor_for_user(scene["people"][who])
    every = ToolCall.objects.all()
    seen = set(access.in_visible_runs(actor, every).values_list("pk", flat=True))
    assert seen == set(access.visible_calls(actor).values_list("pk", flat=True))
    assert (scene["call"].pk in seen, scene["question"].pk in seen) == {
        "owner": (True, True),
        "stranger": (False, False),
        "approver": (True, False),
        "other_approver": (False, False),
        "operator": (True, True),
    }[who]
