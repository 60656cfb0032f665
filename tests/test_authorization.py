"""Issue #12: who gets which status, for every endpoint of SPEC §8 and every console page, as
six actors: the owner, a stranger, the approver of the call's role, an approver of another
role, a staff operator and nobody (SPEC §7: unseen is 404, seen but not yours is 403).

The scene (demo policy): alice's refund of 120 waits on finance in one run; her question
waits on her in another. Each cell runs on a fresh scene (decisions and cancels change it).
The stream and the WebSocket routes share ``live.find_visible_run``; their cells check it.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from agent_core.actors import actor_for_user
from agent_core.live import find_visible_run
from agent_core.models import Run, ToolCall
from tests.conftest import calls_of

pytestmark = pytest.mark.django_db

ACTORS = ["owner", "stranger", "approver", "other_approver", "operator", "anonymous"]


def _user(name: str, *groups: str, staff: bool = False) -> User:
    user = User.objects.create_user(name, is_staff=staff)
    user.groups.set(Group.objects.get_or_create(name=g)[0] for g in groups)
    return user


@pytest.fixture
def scene(turn, settings) -> dict[str, Any]:
    settings.AGENT = {**settings.AGENT, "APPROVAL_POLICY": "demo.policy.DemoPolicy"}
    people = {
        "owner": _user("alice"),
        "stranger": _user("bob"),
        "approver": _user("fran", "finance", staff=True),
        "other_approver": _user("mark", "marketing"),
        "operator": _user("otto", "operator", staff=True),
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


@pytest.mark.parametrize("who", ACTORS[:-1])
def test_the_stream_and_websocket_routes_see_what_the_run_endpoint_sees(scene, who):
    actor = actor_for_user(scene["people"][who])
    ids = _ids(scene)
    for run_id, visible in ((ids["R"], (1, 0, 1, 0, 1)), (ids["QR"], (1, 0, 0, 0, 1))):
        assert (find_visible_run(actor, run_id) is not None) == bool(visible[ACTORS.index(who)])


#  owner stranger approver other operator anonymous (302: to the login page)
CONSOLE = [
    ("/console/inbox/", (403, 403, 200, 403, 200, 302)),
    ("/console/in-doubt/", (403, 403, 200, 403, 200, 302)),
    ("/console/remembered/", (403, 403, 200, 403, 200, 302)),
    ("/console/runs/", (403, 403, 200, 403, 200, 302)),
    ("/console/runs/{R}/", (403, 403, 200, 403, 200, 302)),
    ("/console/runs/{QR}/", (403, 403, 404, 403, 200, 302)),
    ("/console/runs/{QR}/fragment/", (403, 403, 404, 403, 200, 302)),
    ("/console/audit/", (403, 403, 200, 403, 200, 302)),
    ("/console/audit.csv", (403, 403, 200, 403, 200, 302)),
    ("/console/metrics/", (403, 403, 200, 403, 200, 302)),
]


@pytest.mark.parametrize(("path", "expected"), CONSOLE)
@pytest.mark.parametrize("who", ACTORS)
def test_every_console_page_answers_each_actor(scene, who, path, expected):
    response = _client(scene, who).get(path.format(**_ids(scene)))
    assert response.status_code == expected[ACTORS.index(who)]


#  owner stranger approver other operator anonymous
CONSOLE_POSTS = [
    ("/console/calls/{C}/approve/", (403, 403, 302, 403, 403, 302)),
    ("/console/calls/{Q}/answer/", (403, 403, 404, 403, 400, 302)),
    ("/console/runs/{QR}/cancel/", (403, 403, 404, 403, 302, 302)),
]


@pytest.mark.parametrize(("path", "expected"), CONSOLE_POSTS)
@pytest.mark.parametrize("who", ACTORS)
def test_every_console_form_answers_each_actor(scene, who, path, expected):
    response = _client(scene, who).post(path.format(**_ids(scene)))
    assert response.status_code == expected[ACTORS.index(who)]
