"""Writing a run's numbered stream frames and announcing them after commit.

A frame is written in the same transaction as the state it announces. Sequence numbers come from
``Run.last_seq`` bumped by an ``UPDATE … RETURNING`` (``sql.EMIT_FRAMES``): the row lock it takes
is held to commit, so frames of one run commit in ``seq`` order and a reader never sees a gap
that will later fill.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from . import broadcast, sql
from .frames import Frame


def group_name(run_id: str) -> str:
    """The Channels group that carries a run's frames to every subscriber, on any process."""
    return f"agent_run.{run_id}"


def emit(run_id: str, frames: Sequence[Frame]) -> None:
    """Append ``frames`` to the run's stream; they are published after commit."""
    if not frames:
        return
    assert connection.in_atomic_block, "frames are written with the state they announce"
    n = len(frames)
    kinds = [kind for kind, _ in frames]
    payloads = [json.dumps(data) for _, data in frames]
    rows = sql.fetch_all(sql.EMIT_FRAMES, [n, run_id, run_id, n, timezone.now(), kinds, payloads])
    seqs = sorted(row[0] for row in rows)
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
