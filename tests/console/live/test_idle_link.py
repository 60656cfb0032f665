"""An idle console tab keeps its live link: the WebSocket and an SSE stream stay up, quietly.

The channel layer waits up to 5 s for a message; a Redis read timeout as short as that dropped
every idle socket. These hold a console socket and a run's stream open against a real daphne and
real Redis, and read the server's log for errors.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.test import Client
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from agent_core.models import ToolCall
from tests.console.live.browser import start_console_server

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _session(user: Any) -> str:
    client = Client()
    client.force_login(user)
    return str(client.cookies["sessionid"].value)


class _Stream(threading.Thread):
    """Reads a run's SSE stream until it ends or is closed; remembers whether it ended."""

    def __init__(self, url: str, cookie: str) -> None:
        super().__init__(daemon=True)
        self.url, self.cookie = url, cookie
        self.ended = threading.Event()
        self.opened = threading.Event()
        self.client = httpx.Client(timeout=httpx.Timeout(30, read=None))

    def run(self) -> None:
        try:
            with self.client.stream("GET", self.url, cookies={"sessionid": self.cookie}) as r:
                assert r.status_code == 200, r.status_code
                self.opened.set()
                for _ in r.iter_lines():
                    pass
        except httpx.HTTPError:
            return  # closed by the test
        finally:
            self.ended.set()


def _hold_open(people: Any, refund: ToolCall, tmp_path: Path, seconds: float) -> None:
    server = start_console_server(tmp_path / "daphne.log")
    try:
        stream = _Stream(
            f"{server.url}/agent/chat/{refund.run_id}/stream", _session(people["alice"])
        )
        stream.start()
        assert stream.opened.wait(30), "the stream did not open"
        ws_url = server.url.replace("http://", "ws://") + "/console/ws/"
        headers = {"Cookie": f"sessionid={_session(people['fran'])}", "Origin": server.url}
        with connect(ws_url, additional_headers=headers, open_timeout=30) as socket:
            deadline = time.monotonic() + seconds
            while (left := deadline - time.monotonic()) > 0:
                try:
                    socket.recv(timeout=left)  # nothing happens: any message is fine, a close not
                except TimeoutError:
                    break
                except ConnectionClosed as closed:
                    pytest.fail(f"the console socket dropped after an idle wait: {closed}")
            socket.ping().wait(10)
            assert not stream.ended.is_set(), "the SSE stream ended while the run waited"
            # What the server said while both were idle (closing them and stopping the server
            # may log the aborted requests: not the concern here).
            log = server.log.read_text()
        stream.client.close()
        stream.join(10)
    finally:
        server.stop()
    assert "Traceback" not in log and "Timeout" not in log and "failed" not in log, log[-3000:]


def test_an_idle_console_socket_and_stream_stay_up(people, refund, tmp_path):
    _hold_open(people, refund, tmp_path, seconds=15)


@pytest.mark.long
@pytest.mark.timeout(900)
def test_an_idle_console_socket_and_stream_stay_up_for_ten_minutes(people, refund, tmp_path):
    _hold_open(people, refund, tmp_path, seconds=600)
