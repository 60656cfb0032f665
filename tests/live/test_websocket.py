"""The WebSocket route carries the same frames as the SSE stream (real daphne, real client)."""

from __future__ import annotations

import json

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect
from websockets.typing import Origin

from tests.conftest import REFUND
from tests.live.conftest import ALICE, BOB, Stream, read_all, start

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def _ws_url(server_url: str, run_id: str, query: str = "") -> str:
    return server_url.replace("http://", "ws://") + f"/agent/chat/{run_id}/ws{query}"


def _connect(url: str, headers: dict[str, str]):
    # Channels checks Origin against ALLOWED_HOSTS (browsers always send one).
    origin = Origin("http://" + url.split("/")[2])
    return connect(url, additional_headers=headers, origin=origin, open_timeout=30)


def _receive_all(url: str, headers: dict[str, str]) -> list[dict]:
    with _connect(url, headers) as ws:
        messages = []
        while True:
            try:
                messages.append(json.loads(ws.recv(timeout=60)))
            except ConnectionClosed:
                return messages


def test_the_websocket_carries_the_same_frames_as_sse(shop, a, servers):
    started = start(a, REFUND, ALICE)
    stream = Stream(a, started["run_id"], ALICE)
    stream.until("approval-requested")
    stream.close()
    a.post(f"/agent/chat/{started['run_id']}/cancel", headers=ALICE)
    sse = [(f.id, f.data) for f in read_all(a, started["run_id"], ALICE) if f.event == "message"]
    url = _ws_url(servers[1].url, started["run_id"])  # the other process
    messages = _receive_all(url, ALICE)
    assert messages[0] == {
        "event": "meta",
        "data": {"run_id": started["run_id"], "thread_id": started["thread_id"]},
    }
    assert [(m["id"], m["data"]) for m in messages[1:-1]] == sse
    assert messages[-1] == {"event": "done", "data": {"status": "cancelled"}}
    resumed = _receive_all(_ws_url(servers[1].url, started["run_id"], "?after=2"), ALICE)
    assert [(m["id"], m["data"]) for m in resumed[1:-1]] == sse[2:]


@pytest.mark.parametrize(("headers", "query"), [({}, ""), (BOB, ""), (ALICE, "?after=x")])
def test_the_websocket_refuses_the_handshake(shop, a, servers, headers, query):
    started = start(a, "hello", ALICE)
    with pytest.raises(InvalidStatus) as refused:
        _connect(_ws_url(servers[0].url, started["run_id"], query), headers)
    assert refused.value.response.status_code == 403
