"""A run's frames are written as they were emitted, whatever their text holds, and numbered in
order (``stream_log.emit``: one statement for the run's row and its frames, the frames sent to it
as one JSON parameter), bound on the server and on the client alike."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from django.db import connection, transaction

from agent_core.engine import stream_log
from agent_core.engine.frames import Frame
from agent_core.models import Run, StreamFrame, Thread

pytestmark = pytest.mark.django_db

TRICKY: list[Frame] = [
    Frame("text", {"text": 'a "quoted" word, a back\\slash, {braces}, a comma, NULL'}),
    Frame("text", {"text": "ünïcødé ✓ 雨 \U0001f600, a tab\tand a newline\n"}),
    Frame("tool-input", {"args": {"nested": [1, 2.5, None, True, {"k": "v"}]}, "id": "c_1"}),
    Frame("data-custom", {"empty": "", "list": [], "object": {}}),
]


def _run() -> Run:
    thread = Thread.objects.create(owner_ref="user:alice", agent="support")
    # Waiting: no driver touches the run; this test writes its frames.
    return Run.objects.create(
        thread=thread, agent="support", actor_ref="test", runner="inline", status="waiting"
    )


def _written(run: Run) -> list[tuple[int, str, Any]]:
    rows = StreamFrame.objects.filter(run=run).order_by("seq")
    return [(frame.seq, frame.kind, frame.data) for frame in rows]


@pytest.mark.parametrize(
    "factory", [psycopg.Cursor, psycopg.ClientCursor], ids=["server", "client"]
)
def test_frames_are_stored_as_emitted_and_numbered_in_order(factory: type) -> None:
    # Bound as Django's ``server_side_binding`` binds (prepared on its second run), or on the
    # client.
    connection.ensure_connection()
    raw: Any = connection.connection
    kept = raw.cursor_factory, raw.prepare_threshold
    raw.cursor_factory, raw.prepare_threshold = factory, 1
    try:
        run = _run()
        with transaction.atomic():
            stream_log.emit(run.pk, TRICKY[:1])
        with transaction.atomic():
            stream_log.emit(run.pk, TRICKY[1:])
    finally:
        raw.cursor_factory, raw.prepare_threshold = kept
    assert _written(run) == [(seq, kind, data) for seq, (kind, data) in enumerate(TRICKY, 1)]
    run.refresh_from_db()
    assert run.last_seq == len(TRICKY)
