"""Writing a run's numbered stream frames and announcing them after commit.

A frame is written in the same transaction as the state it announces. Sequence numbers come from
``Run.last_seq`` bumped by an ``UPDATE … RETURNING``: the row lock it takes is held to commit, so
frames of one run commit in ``seq`` order and a reader never sees a gap that will later fill.
"""

from __future__ import annotations

from typing import Any

from django.db import connection, transaction

from . import broadcast
from .models import Run, StreamFrame


def group_name(run_id: str) -> str:
    """The Channels group that carries a run's frames to every subscriber, on any process."""
    return f"agent_run.{run_id}"


def emit(run_id: str, frames: list[tuple[str, dict[str, Any]]]) -> list[StreamFrame]:
    """Append frames (``(kind, data)``) to the run's stream; they are published after commit."""
    if not frames:
        return []
    assert connection.in_atomic_block, "frames are written with the state they announce"
    table = Run._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET last_seq = last_seq + %s WHERE id = %s RETURNING last_seq",
            [len(frames), run_id],
        )
        row = cursor.fetchone()
    assert row is not None, f"no run {run_id}"
    first = row[0] - len(frames) + 1
    rows = StreamFrame.objects.bulk_create(
        StreamFrame(run_id=run_id, seq=first + i, kind=kind, data=data)
        for i, (kind, data) in enumerate(frames)
    )
    transaction.on_commit(lambda: publish(run_id, rows))
    return rows


def publish(run_id: str, frames: list[StreamFrame]) -> None:
    """Send committed frames to live subscribers; a subscriber that misses one reads the table.

    Queued on this process's broadcast loop: the committing driver does not wait for Redis.
    """
    message = {
        "type": "run.frames",
        "frames": [{"seq": f.seq, "kind": f.kind, "data": f.data} for f in frames],
    }
    broadcast.send(group_name(run_id), message)
