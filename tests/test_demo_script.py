"""`make demo`'s supervisor (scripts/demo.py) waits for the web server to answer a request, so
that the server's first event, which starts the inline runner's sweeper, has happened before the
banner: the crash walkthrough (kill the CLI mid-send) needs no page load (issue 42)."""

from __future__ import annotations

import importlib.util
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "demo.py"


def _demo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("demo_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


class _Recorder(BaseHTTPRequestHandler):
    seen: list[str] = []

    def do_GET(self) -> None:
        self.seen.append(self.path)
        self.send_response(302)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def web() -> Iterator[ThreadingHTTPServer]:
    _Recorder.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_the_supervisor_sends_the_web_server_a_request_before_it_says_it_is_up(web):
    assert _demo().answers_http(web.server_address[1])
    assert _Recorder.seen == ["/console/login/"]


def test_a_closed_port_is_not_up():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    port = server.server_address[1]
    server.server_close()
    assert not _demo().answers_http(port)
