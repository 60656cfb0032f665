"""The WebSocket route accepts what the REST API accepts: the session and DRF tokens."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.authtoken.models import Token
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect
from websockets.typing import Origin, Subprotocol

from tests.live.server import Server, start_server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture(scope="module")
def server(
    django_db_setup: None, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """A daphne with the production resolver: Django auth (session or token), no headers."""
    log = tmp_path_factory.mktemp("ws-auth") / "daphne.log"
    started = start_server(log, AIRLOCK_ACTOR_RESOLVER="agent_core.actors.DjangoAuthResolver")
    yield started
    started.stop()


@pytest.fixture
def tokens(shop: None, people: dict[str, User]) -> dict[str, str]:
    """alice's and bob's API tokens."""
    return {name: Token.objects.create(user=people[name]).key for name in ("alice", "bob")}


def _run(server: Server, token: str) -> str:
    response = httpx.post(
        f"{server.url}/agent/chat",
        json={"agent": "support", "message": "hello"},
        headers={"Authorization": f"Token {token}"},
        timeout=60,
    )
    assert response.status_code == 202, response.text
    return str(response.json()["run_id"])


def _open(
    server: Server, run_id: str, headers: dict[str, str], protocols: tuple[str, ...] = ()
) -> Any:
    url = server.url.replace("http://", "ws://") + f"/agent/chat/{run_id}/ws"
    return connect(
        url,
        additional_headers=headers,
        subprotocols=[Subprotocol(p) for p in protocols] or None,
        origin=Origin("http://" + url.split("/")[2]),
        open_timeout=30,
    )


def _meta(ws: Any) -> dict[str, Any]:
    return dict(json.loads(ws.recv(timeout=60)))


def test_a_token_in_the_authorization_header(server, tokens):
    run_id = _run(server, tokens["alice"])
    with _open(server, run_id, {"Authorization": f"Token {tokens['alice']}"}) as ws:
        assert _meta(ws)["event"] == "meta"


def test_a_token_offered_as_a_subprotocol_for_browsers(server, tokens):
    run_id = _run(server, tokens["alice"])
    with _open(server, run_id, {}, ("airlock", f"airlock.token.{tokens['alice']}")) as ws:
        assert ws.subprotocol == "airlock"  # the token is never echoed back
        assert _meta(ws)["data"]["run_id"] == run_id


def test_the_session_still_works(server, tokens):
    run_id = _run(server, tokens["alice"])
    browser = Client()
    browser.force_login(User.objects.get(username="alice"))
    cookie = f"{settings.SESSION_COOKIE_NAME}={browser.cookies[settings.SESSION_COOKIE_NAME].value}"
    with _open(server, run_id, {"Cookie": cookie}) as ws:
        assert _meta(ws)["event"] == "meta"


@pytest.mark.parametrize(
    ("who", "protocols"),
    [
        ("bad header", ()),
        ("bad protocol", ("airlock", "airlock.token.0123456789abcdef")),
        ("bob", ()),  # a valid token of someone who may not see the run
        ("nobody", ()),
    ],
)
def test_bad_or_unseeing_credentials_are_refused(server, tokens, who, protocols):
    run_id = _run(server, tokens["alice"])
    headers = {
        "bad header": {"Authorization": "Token 0123456789abcdef"},
        "bob": {"Authorization": f"Token {tokens['bob']}"},
    }.get(who, {})
    with pytest.raises(InvalidStatus) as refused:
        _open(server, run_id, headers, protocols)
    assert refused.value.response.status_code == 403
