"""A stream as the project's ASGI application serves it (``with_airlock`` around Django's ASGI
handler), driven in process."""

from __future__ import annotations

import threading

from asgiref.testing import ApplicationCommunicator
from django.test import Client

from agent_core.streams import fanout, live
from config.asgi import application


def session_cookie(client: Client) -> str:
    """The session cookie ``force_login`` gave ``client`` (none for the anonymous)."""
    return client.cookies.output(attrs=[], header="", sep=";").strip()


async def asgi_stream(client: Client, url: str) -> tuple[int, dict[str, str], bytes]:
    """The stream's status, headers and first body part, through the ASGI stack a server runs
    (without its start-up hook, which would start the inline runner's sweeper); the stream ends
    when the client leaves (``http.disconnect``), and its live feed with it."""
    scope = {
        **{"type": "http", "http_version": "1.1", "method": "GET", "scheme": "http"},
        **{"path": url, "root_path": "", "query_string": b"", "server": ("testserver", 80)},
        "headers": [(b"host", b"testserver"), (b"cookie", session_cookie(client).encode())],
    }
    communicator = ApplicationCommunicator(application.router, scope)
    await communicator.send_input({"type": "http.request", "body": b""})
    start = await communicator.receive_output(10)
    body = await communicator.receive_output(10)
    await communicator.send_input({"type": "http.disconnect"})
    await communicator.wait(10)
    assert fanout.followed() == {}
    readers_idle()
    headers = {name.decode(): value.decode() for name, value in start["headers"]}
    return start["status"], headers, body["body"]


def readers_idle() -> None:
    """Wait until every read queued on the stream-reader threads has finished. A stream that
    ended still leaves the read it was awaiting running on its thread (cancelling the await does
    not stop the thread); one still reading when a ``transaction=True`` test flushes the tables
    deadlocked with the flush's ``TRUNCATE`` once in CI. One waiting task per thread, queued after
    those reads, all meet only once each thread is done with what came before."""
    met = threading.Barrier(live.READER_THREADS + 1)
    for _ in range(live.READER_THREADS):
        live._readers.submit(met.wait, 10)
    met.wait(10)
