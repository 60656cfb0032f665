"""Issue #12: who gets which status, for every endpoint of SPEC §8 and every console page, as
six actors: the owner, a stranger, the approver of the call's role, an approver of another
role (staff: the console opens to it, and must show it none of the others' calls), a staff
operator and nobody (SPEC §7: unseen is 404, seen but not yours is 403).

The scene (demo policy): alice's refund of 120 waits on finance in one run; her question
waits on her in another. Each cell runs on a fresh scene (decisions and cancels change it).
The stream and the two WebSockets are asked for real: their reads run on ``live.read``'s
threads with their own connections, so their cells commit the scene (``transaction=True``).
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlsplit

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Group
from django.test import AsyncClient, Client

from agent_core.actors import actor_for_user
from agent_core.asgi import websocket_application
from agent_core.engine import access
from agent_core.models import Message, Run, ToolCall
from approvals import links
from approvals.models import DecisionAttempt, LinkUse
from config.asgi import application
from console.consumers import CONSOLE_GROUP
from tests.asgi_stream import asgi_stream, session_cookie
from tests.conftest import calls_of
from tests.factories import make_user

pytestmark = pytest.mark.django_db

ACTORS = ["owner", "stranger", "approver", "other_approver", "operator", "anonymous"]


@pytest.fixture
def scene(turn, settings) -> dict[str, Any]:
    settings.AGENT = {**settings.AGENT, "APPROVAL_POLICY": "demo.policy.DemoPolicy"}
    people = {
        "owner": make_user("alice"),
        "stranger": make_user("bob"),
        "approver": make_user("fran", "finance", staff=True),
        "other_approver": make_user("mark", "marketing", staff=True),
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
    said = Message.objects.filter(thread_id=run.thread_id).order_by("seq").first()
    assert said is not None
    ids = {"R": run.pk, "T": run.thread_id, "C": call.pk, "Q": question.pk, "QR": question.run_id}
    return {**ids, "M": said.pk}


#          owner stranger approver other operator anonymous
API = [
    ("get", "/agent/threads", None, (200, 200, 200, 200, 200, 401)),
    ("get", "/agent/threads/{T}", None, (200, 404, 200, 404, 200, 401)),
    ("delete", "/agent/threads/{T}", None, (409, 404, 403, 404, 403, 401)),
    ("patch", "/agent/threads/{T}", {"title": "renamed"}, (200, 404, 403, 404, 403, 401)),
    ("post", "/agent/threads/{T}/fork", {"message_id": "{M}"}, (201, 404, 201, 404, 201, 401)),
    ("delete", "/agent/threads/{T}/messages?from={M}", None, (409, 404, 403, 404, 403, 401)),
    ("get", "/agent/runs", None, (200, 200, 200, 200, 200, 401)),
    ("get", "/agent/runs/{R}", None, (200, 404, 200, 404, 200, 401)),
    ("get", "/agent/runs/{QR}", None, (200, 404, 404, 404, 200, 401)),
    ("post", "/agent/chat", {"agent": "support", "message": "hi", "thread_id": "{T}"},
     (409, 404, 403, 404, 403, 401)),
    ("post", "/agent/chat", {"thread_id": "{T}", "regenerate": True},
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
    ("asgi", "/agent/chat/{R}/stream", (200, 404, 200, 404, 200, 401)),
    ("asgi", "/agent/chat/{QR}/stream", (200, 404, 404, 404, 200, 401)),
    ("ws", "/agent/chat/{R}/ws", (True, False, True, False, True, False)),
    ("ws", "/agent/chat/{QR}/ws", (True, False, False, False, True, False)),
    # The console's socket lets in every member (issue 42: requesters at home); a run's frames
    # go to those who may follow it, its owner included, by the API's rule (``access``).
    ("ws", "/console/ws/runs/{R}/", (True, False, True, False, True, False)),
    ("ws", "/console/ws/runs/{QR}/", (True, False, False, False, True, False)),
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
    stream = asgi_stream if kind == "asgi" else _stream
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
    ("/console/inbox/fragment/", (200, 200, 200, 200, 200, 302)),
    ("/console/inbox/fragment/?show=others", (200, 200, 200, 200, 200, 302)),
    ("/console/mine/", (200, 200, 200, 200, 200, 302)),
    ("/console/calls/{C}/", (200, 404, 200, 404, 200, 302)),
    ("/console/calls/{Q}/", (200, 404, 404, 404, 200, 302)),
    ("/console/calls/{C}/row/", (204, 204, 200, 204, 204, 302)),
    ("/console/calls/{C}/row/?show=others", (200, 204, 204, 204, 200, 302)),
    ("/console/calls/{Q}/row/?show=others", (204, 204, 204, 204, 200, 302)),
    ("/console/calls/{C}/state/", (200, 404, 200, 404, 200, 302)),
    ("/console/calls/{Q}/state/", (200, 404, 404, 404, 200, 302)),
    ("/console/in-doubt/", (403, 403, 200, 200, 200, 302)),
    ("/console/in-doubt/fragment/", (403, 403, 200, 200, 200, 302)),
    ("/console/remembered/", (403, 403, 200, 200, 200, 302)),
    ("/console/runs/", (403, 403, 200, 200, 200, 302)),
    ("/console/runs/{R}/", (403, 403, 200, 404, 200, 302)),
    ("/console/runs/{R}/fragment/", (403, 403, 200, 404, 200, 302)),
    ("/console/runs/{QR}/", (403, 403, 404, 404, 200, 302)),
    ("/console/runs/{QR}/fragment/", (403, 403, 404, 404, 200, 302)),
    ("/console/audit/", (403, 403, 200, 200, 200, 302)),
    ("/console/audit.csv", (403, 403, 200, 200, 200, 302)),
    ("/console/metrics/", (403, 403, 200, 200, 200, 302)),
    ("/console/deliveries/", (403, 403, 200, 200, 200, 302)),
]


@pytest.mark.parametrize(("path", "expected"), CONSOLE)
@pytest.mark.parametrize("who", ACTORS)
def test_every_console_page_and_fragment_answers_each_actor(scene, who, path, expected):
    ids = _ids(scene)
    response = _client(scene, who).get(path.format(**ids), headers={"X-Console-Fragment": "1"})
    assert response.status_code == expected[ACTORS.index(who)]
    if who == "other_approver":  # it opens the console, and sees nothing of alice's runs
        content = b"".join(response) if response.streaming else response.content
        body = content.decode()
        assert not {ids["C"], ids["Q"], ids["R"], ids["QR"], "A-1001"} & set(_words(body))


def _words(body: str) -> list[str]:
    return [w for w in re.split(r"[^A-Za-z0-9_-]+", body) if w]


#  owner stranger approver other operator anonymous (the first step: the calls to confirm; any
# logged-in user may decide in bulk what the policy lets them: alice sees her own call)
BULK = (200, 400, 200, 400, 200, 302)


@pytest.mark.parametrize("who", ACTORS)
def test_the_bulk_confirmation_lists_only_calls_the_viewer_may_see(scene, who):
    """Issue #35: the first step of a bulk decision showed any call to any console user."""
    ids = _ids(scene)
    form = {"ids": [ids["C"]], "action": "approve"}
    response = _client(scene, who).post("/console/inbox/bulk/", form)
    assert response.status_code == BULK[ACTORS.index(who)]
    shown = ids["C"] in _words(response.content.decode())
    assert shown is (response.status_code == 200)
    refused = DecisionAttempt.objects.filter(tool_call_id=ids["C"], outcome="not_found")
    # Asked to decide a call it may not see: a refused attempt, audited as the port does.
    assert refused.exists() is (who in ("stranger", "other_approver"))
    if who == "other_approver":
        client = _client(scene, who)
        confirmed = client.post("/console/inbox/bulk/", {**form, "confirm": "on"})
        assert confirmed.status_code == 400
        assert ToolCall.objects.get(pk=ids["C"]).status == "pending_approval"
        assert refused.count() == 2
        # Its own refused attempts stay out of its audit: their rows name alice's tool and run.
        audit = client.get("/console/audit/").content.decode()
        assert not {ids["C"], ids["R"], "issue_refund"} & set(_words(audit))


#  owner stranger approver other operator anonymous
CONSOLE_POSTS = [
    ("/console/calls/{C}/approve/", (403, 404, 302, 404, 403, 302)),
    ("/console/calls/{Q}/answer/", (400, 404, 404, 404, 400, 302)),
    ("/console/runs/{QR}/cancel/", (403, 403, 404, 404, 302, 302)),
]


@pytest.mark.parametrize(("path", "expected"), CONSOLE_POSTS)
@pytest.mark.parametrize("who", ACTORS)
def test_every_console_form_answers_each_actor(scene, who, path, expected):
    ids = _ids(scene)
    response = _client(scene, who).post(path.format(**ids))
    assert response.status_code == expected[ACTORS.index(who)]
    if "/calls/" in path:  # a decision asked of an unseen call: a refused attempt, audited
        call_id = ids["C"] if "{C}" in path else ids["Q"]
        refused = DecisionAttempt.objects.filter(tool_call_id=call_id, outcome="not_found")
        assert refused.filter(via="console").exists() is (response.status_code == 404)


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


@pytest.mark.django_db(transaction=True)
def test_console_events_reach_only_the_viewers_who_may_see_their_runs(scene, turn):
    """Issue #35: every console page shared one group, so every viewer was told of every call
    and run as it happened. Events now reach the pages of those who may see the run."""
    mark = actor_for_user(scene["people"]["other_approver"])
    marks = turn("hello", actor=mark).pk
    alices = scene["run"].pk
    call = scene["call"].pk
    events = [
        [{"event": "approval_requested", "run_id": alices, "call_id": call}],
        [{"event": "run_started", "run_id": marks, "call_id": ""}],
        [{"event": "approval_settled", "run_id": alices, "call_id": call}],
        [{"event": "run_finished", "run_id": marks, "call_id": ""}],
    ]
    # Per viewer, the events it is told of, in order (one sent to it out of turn would show).
    wanted = {
        "approver": [events[0], events[2]],
        "other_approver": [events[1], events[3]],
        "operator": events,
    }

    async def scenario() -> dict[str, list[dict[str, Any]]]:
        pages = {}
        for who in wanted:
            pages[who] = WebsocketCommunicator(websocket_application(), "/console/ws/")
            pages[who].scope["user"] = scene["people"][who]
            assert (await pages[who].connect())[0]
        layer = get_channel_layer()
        await layer.group_send(
            CONSOLE_GROUP, {"type": "console.events", "events": events[0] + events[1]}
        )
        await layer.group_send(
            CONSOLE_GROUP, {"type": "console.events", "events": events[2] + events[3]}
        )
        told = {}
        for who, page in pages.items():
            told[who] = [await page.receive_json_from(timeout=10) for _ in wanted[who]]
            await page.disconnect()
        return told

    told = async_to_sync(scenario)()
    for who, want in wanted.items():
        assert told[who] == [{"type": "event", **e[0]} for e in want], who


LINK_REFUSALS = [
    # how the link's person changed, its refusal, how it is undone
    ("deactivated", "link_inactive"),
    ("de-roled", "not_approver"),
    ("another session", "link_other_person"),
]


@pytest.mark.parametrize(("change", "code"), LINK_REFUSALS)
def test_a_link_refuses_a_person_who_changed_and_stays_unspent(
    scene, change, code, django_capture_on_commit_callbacks
):
    """Issue #35: a link decided for its deactivated person (and ran the refund), answered 404
    to one who lost the role and was spent anyway, and decided as fran for mia signed in."""
    fran = scene["people"]["approver"]
    call: ToolCall = scene["call"]
    url = urlsplit(links.decision_links(call, actor_for_user(fran).ref, via="email")["approve"])
    browser = Client()
    if change == "deactivated":
        fran.is_active = False
        fran.save()
    elif change == "de-roled":
        fran.groups.clear()
    else:
        browser.force_login(scene["people"]["other_approver"])
    for method in ("get", "post"):
        response = getattr(browser, method)(url.path)
        assert response.status_code == 403
        assert f'data-code="{code}"'.encode() in response.content
    call.refresh_from_db()
    assert call.status == "pending_approval" and not LinkUse.objects.exists()
    # The refused POST is audited (the GET is not); nothing of the link was spent.
    tried = scene["people"]["other_approver" if change == "another session" else "approver"]
    assert list(DecisionAttempt.objects.values_list("outcome", "via", "actor_ref")) == [
        (code, "email", actor_for_user(tried).ref)
    ]
    if change == "deactivated":
        fran.is_active = True
        fran.save()
    elif change == "de-roled":
        fran.groups.set(Group.objects.filter(name="finance"))
    else:
        browser.logout()
    with django_capture_on_commit_callbacks(execute=True):
        assert browser.post(url.path).status_code == 200
    call.refresh_from_db()
    assert call.status == "succeeded"
