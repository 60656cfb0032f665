"""Writing a run's numbered stream frames and announcing them after commit.

A frame is written in the same transaction as the state it announces. Sequence numbers come from
``Run.last_seq`` bumped by an ``UPDATE … RETURNING``: the row lock it takes is held to commit, so
frames of one run commit in ``seq`` order and a reader never sees a gap that will later fill.
"""

from __future__ import annotations

import json
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from . import broadcast
from .models import Run, StreamFrame

Frames = list[tuple[str, dict[str, Any]]]

# One statement: reserve the numbers on the run row and insert the frames that take them.
_EMIT = (
    f"WITH r AS (UPDATE {Run._meta.db_table} SET last_seq = last_seq + %s WHERE id = %s"
    " RETURNING last_seq)"
    f" INSERT INTO {StreamFrame._meta.db_table} (run_id, seq, kind, data, superseded, created_at)"
    " SELECT %s, r.last_seq - %s + f.n, f.kind, f.data::jsonb, false, %s"
    " FROM r, unnest(%s::varchar[], %s::text[]) WITH ORDINALITY AS f(kind, data, n)"
    " RETURNING seq"
)


def group_name(run_id: str) -> str:
    """The Channels group that carries a run's frames to every subscriber, on any process."""
    return f"agent_run.{run_id}"


def emit(run_id: str, frames: Frames) -> None:
    """Append frames (``(kind, data)``) to the run's stream; they are published after commit."""
    if not frames:
        return
    assert connection.in_atomic_block, "frames are written with the state they announce"
    n = len(frames)
    kinds = [kind for kind, _ in frames]
    payloads = [json.dumps(data) for _, data in frames]
    with connection.cursor() as cursor:
        cursor.execute(_EMIT, [n, run_id, run_id, n, timezone.now(), kinds, payloads])
        seqs = sorted(row[0] for row in cursor.fetchall())
    assert len(seqs) == n, f"no run {run_id}"
    published = [
        {"seq": seq, "kind": kind, "data": data}
        for seq, (kind, data) in zip(seqs, frames, strict=True)
    ]
    transaction.on_commit(lambda: publish(run_id, published))


def publish(run_id: str, frames: list[dict[str, Any]]) -> None:
    """Send committed frames to live subscribers; a subscriber that misses one reads the table.

    Queued on this process's broadcast loop: the committing driver does not wait for Redis.
    """
    broadcast.send(group_name(run_id), {"type": "run.frames", "frames": frames})
