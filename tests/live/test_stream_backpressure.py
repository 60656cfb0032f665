"""A stream whose client reads slower than the run writes, under uvicorn (the manual's streams
server): the frames the run's feed writes for it wait for the socket (uvicorn's flow control)
without blocking the feed, go out in order, and none is lost or sent twice."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.db import transaction

from agent_core.engine import frames, stream_log
from agent_core.engine.frames import Frame
from agent_core.models import Run, Thread
from tests.live.server import Server, start_server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# Far more than the socket buffers and uvicorn's high-water mark (64 KiB) hold.
FRAMES, TEXT = 400, "x" * 16_000


@pytest.fixture(scope="module")
def uvicorn(
    django_db_setup: None, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    server = start_server(
        Path(tmp_path_factory.mktemp("uvicorn")) / "streams.log", server="uvicorn"
    )
    yield server
    server.stop()


def _read_until(sock: socket.socket, marker: bytes, received: bytearray) -> None:
    while marker not in received:
        chunk = sock.recv(65536)
        assert chunk, f"the stream closed before {marker!r}"
        received += chunk


def test_a_client_reading_slowly_gets_every_frame_once_in_order(uvicorn: Server) -> None:
    thread = Thread.objects.create(owner_ref="user:alice", agent="live")
    # Waiting: no driver touches the run; this test writes its frames.
    run = Run.objects.create(
        thread=thread, agent="live", actor_ref="test", runner="inline", status="waiting"
    )
    url = urlsplit(uvicorn.url)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a slow reader's small window
    sock.settimeout(60)  # a guard against a hung server, not a timing assertion
    sock.connect((url.hostname, url.port))
    request = (
        f"GET /agent/chat/{run.pk}/stream HTTP/1.1\r\n"
        f"Host: {url.netloc}\r\nX-Actor-Id: user:alice\r\n\r\n"
    )
    sock.sendall(request.encode())
    received = bytearray()
    _read_until(sock, b"event: meta", received)
    for _ in range(FRAMES):  # not read meanwhile: the server's writes back up
        with transaction.atomic():
            stream_log.emit(run.pk, [Frame("text", {"text": TEXT})])
    with transaction.atomic():
        stream_log.emit(run.pk, [frames.finish("completed")])
        Run.objects.filter(pk=run.pk).update(status="completed")
    _read_until(sock, b"event: done", received)
    sock.close()
    ids = [int(seq) for seq in re.findall(rb"^id: (\d+)$", bytes(received), re.MULTILINE)]
    assert ids == list(range(1, FRAMES + 2))
