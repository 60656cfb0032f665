"""A local HTTP receiver of webhooks: verifies each signature independently, can be told to fail."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SECRET = "whsec-test"


def signed_correctly(body: bytes, header: str, secret: str = SECRET) -> bool:
    """The receiver's own check: ``t=<ts>,v1=<hex>`` with HMAC-SHA256 over ``"<ts>.<body>"``."""
    fields = dict(part.split("=", 1) for part in header.split(","))
    expected = hmac.new(secret.encode(), f"{fields['t']}.".encode() + body, hashlib.sha256)
    return hmac.compare_digest(expected.hexdigest(), fields["v1"])


class Receiver:
    """Accepts POSTs on 127.0.0.1: 500 to the first ``failures`` of them, then ``status``; with
    ``hang``, answers none until ``release()`` (a sender that waits is in the middle of a send)."""

    def __init__(self, status: int = 200, *, failures: int = 0, hang: bool = False) -> None:
        self.status, self.failures, self.hang = status, failures, hang
        self.received: list[dict[str, Any]] = []
        self.released = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.received.append(
                    {
                        "body": json.loads(body),
                        "verified": signed_correctly(body, self.headers["X-Airlock-Signature"]),
                    }
                )
                if receiver.hang:
                    receiver.released.wait()
                failing = len(receiver.received) <= receiver.failures
                self.send_response(500 if failing else receiver.status)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def release(self) -> None:
        """Answer the requests held so far, and every later one at once."""
        self.released.set()

    def close(self) -> None:
        self.release()
        self.server.shutdown()
        self.server.server_close()
