"""The run's stream log: writing its numbered frames and announcing them after commit.

A frame is written in the same transaction as the state it announces. Sequence numbers come from
``Run.last_seq`` bumped by an ``UPDATE … RETURNING`` (``sql.EMIT_FRAMES``): the row lock it takes
is held to commit, so frames of one run commit in ``seq`` order and a reader never sees a gap
that will later fill.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from . import broadcast, rows, sql
from .frames import Frame


def group_name(run_id: str) -> str:
    """The Channels group that carries a run's frames to every subscriber, on any process."""
    return f"agent_run.{run_id}"


def emit(run_id: str, frames: Sequence[Frame]) -> None:
    """Append ``frames`` to the run's stream, and to the stream of each ancestor waiting on it
    (SPEC §9: numbered in that ancestor's sequence, carrying the child's ``run_id`` and
    ``parent_tool_call_id``); they are published after commit."""
    if frames:
        written = emit_with(sql.EMIT_FRAMES, {}, run_id, frames)
        assert written is not None, f"no run {run_id}"


def emit_with(
    statement: str, params: Mapping[str, Any], run_id: str, frames: Sequence[Frame]
) -> dict[str, Any] | None:
    """``emit``, by ``statement``: one of ``sql``'s statements that write frames with the state
    they announce (one round trip), run with ``params`` and the frames' own (``run_id``,
    ``frame_count``, ``frames``, ``frames_at``). Its row by column name, or ``None`` when it
    answered none (a compare-and-set that lost: no frame was written)."""
    assert frames, "a statement that writes frames writes at least one"
    assert connection.in_atomic_block or rows.in_one_statement(), (
        "frames are written with the state they announce"
    )
    row = rows.fetch_row(statement, {**params, **_numbered(run_id, frames)})
    if row is None:
        return None
    published(run_id, frames, row["last_seq"])
    mirror(run_id, frames, row["parent_run_id"], row["parent_tool_call_id"])
    return row


def _numbered(run_id: str, frames: Sequence[Frame]) -> dict[str, Any]:
    """The parameters every statement writing frames takes."""
    return {
        "run_id": run_id,
        "frame_count": len(frames),
        # One text parameter: psycopg quotes and backslash-escapes every element of a text array
        # in Python, by regular expression.
        "frames": json.dumps([[kind, data] for kind, data in frames]),
        "frames_at": timezone.now(),
    }


def published(run_id: str, frames: Sequence[Frame], last_seq: int) -> None:
    """Publish ``frames``, numbered up to ``last_seq``, once the transaction commits."""
    first = last_seq - len(frames) + 1
    published = [
        {"seq": first + n, "kind": kind, "data": data} for n, (kind, data) in enumerate(frames)
    ]
    transaction.on_commit(lambda: publish(run_id, published), robust=True)


def mirror(
    run_id: str, frames: Sequence[Frame], parent_run_id: str | None, call_id: str | None
) -> None:
    """Copy a child's frames into the stream of each ancestor waiting on it, up the chain."""
    origin = {"run_id": run_id, "parent_tool_call_id": call_id}
    while parent_run_id is not None and call_id is not None:
        assert connection.in_atomic_block, "a mirrored frame is a second statement"
        # Frames mirrored from a grandchild already say where they come from.
        frames = [Frame(kind, {**origin, **data}) for kind, data in frames]
        found = rows.fetch_row(sql.MIRROR_FRAMES, _numbered(parent_run_id, frames))
        if found is None:  # the ancestor has ended: its stream is closed
            break
        published(parent_run_id, frames, found["last_seq"])
        parent_run_id, call_id = found["parent_run_id"], found["parent_tool_call_id"]


def publish(run_id: str, frames: list[dict[str, Any]]) -> None:
    """Send committed frames to live subscribers; a subscriber that misses one reads the table.

    Queued on this process's broadcast loop: the committing driver does not wait for Redis.
    """
    broadcast.send(group_name(run_id), {"type": "run.frames", "frames": frames}, merge="frames")
