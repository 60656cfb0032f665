"""A local HTTP server that answers model requests with scripted, streamed replies.

The real SDKs talk to it over real HTTP; it records every request body so tests can check what
the SDK sent. Replies are served in order; each is a status, a body, or SSE events streamed one
write at a time, optionally followed by a hang (for abort tests) that ends when the test ends.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted HTTP answer."""

    status: int = 200
    events: list[str] = field(default_factory=list)  # raw SSE text, one write each
    body: dict[str, Any] | None = None  # a JSON body instead of a stream (errors)
    hang: bool = False  # after the events, keep the connection open and silent


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class FakeModelServer:
    """Serves queued ``Reply`` objects on ``127.0.0.1:<random port>``."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[Seen] = []
        self.released = threading.Event()  # ends every hang
        self.disconnected = threading.Event()  # a hanging reply saw its client go away
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> FakeModelServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.released.set()
        self._server.shutdown()
        self._server.server_close()

    def queue(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                headers = {k.lower(): v for k, v in self.headers.items()}
                server.requests.append(Seen(self.path, headers, body))
                reply = server.replies.popleft() if server.replies else Reply(status=599)
                if reply.body is not None or not reply.events:
                    data = json.dumps(reply.body or {}).encode()
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                self.send_response(reply.status)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                for event in reply.events:
                    self.wfile.write(event.encode())
                    self.wfile.flush()
                if reply.hang:
                    self._hang()
                self.close_connection = True

            def _hang(self) -> None:
                # Wait, silent, until the test ends or the client closes the connection.
                self.connection.settimeout(0.05)
                while not server.released.is_set():
                    try:
                        if self.connection.recv(1) == b"":
                            server.disconnected.set()
                            return
                    except TimeoutError:
                        continue
                    except OSError:
                        server.disconnected.set()
                        return

        return Handler
