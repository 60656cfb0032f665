"""Writing a run's numbered stream frames and announcing them after commit.

A frame is written in the same transaction as the state it announces. Sequence numbers come from
``Run.last_seq`` bumped by an ``UPDATE … RETURNING`` (``sql.EMIT_FRAMES``): the row lock it takes
is held to commit, so frames of one run commit in ``seq`` order and a reader never sees a gap
that will later fill.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from . import broadcast, rows, sql
from .frames import Frame


def group_name(run_id: str) -> str:
    """The Channels group that carries a run's frames to every subscriber, on any process."""
    return f"agent_run.{run_id}"


@dataclass(frozen=True)
class Riding:
    """Writes that ride on the statement numbering a run's frames: a named statement built by
    ``sql.with_frames`` and the parameters of its ``before`` and ``sets`` parts."""

    statement: str
    before: Sequence[Any] = ()
    sets: Sequence[Any] = ()


def emit(run_id: str, frames: Sequence[Frame], riding: Riding | None = None) -> tuple[Any, ...]:
    """Append ``frames`` to the run's stream, and to the stream of each ancestor waiting on it
    (SPEC §9: numbered in that ancestor's sequence, carrying the child's ``run_id`` and
    ``parent_tool_call_id``); they are published after commit.

    ``riding``: writes made by the same statement (one round trip); returns that statement's
    ``extra`` columns (nothing without it).
    """
    if not frames:
        assert riding is None, "writes ride on frames"
        return ()
    extra = emit_if(run_id, frames, riding or Riding(sql.EMIT_FRAMES))
    assert extra is not None, f"no run {run_id}"
    return extra


def emit_if(run_id: str, frames: Sequence[Frame], riding: Riding) -> tuple[Any, ...] | None:
    """``emit``, with writes that may match nothing (a compare-and-set whose frames are written
    only when it wins, ``sql.END_RUN_AND_FINISH``): ``None`` when the statement answered no row,
    and no frame was written."""
    assert connection.in_atomic_block or rows.in_one_statement(), (
        "frames are written with the state they announce"
    )
    row = _write(riding, run_id, frames)
    if row is None:
        return None
    mirror(run_id, frames, row[1], row[2])
    return row[3:]


def mirror(
    run_id: str, frames: Sequence[Frame], parent_run_id: str | None, parent_tool_call_id: str | None
) -> None:
    """Append ``frames``, just written to the run's stream, to the stream of each ancestor
    waiting on it (``parent_run_id``, ``parent_tool_call_id``: the run's, as the statement that
    wrote them read them)."""
    parent = (parent_run_id, parent_tool_call_id)
    origin = {"run_id": run_id, "parent_tool_call_id": parent[1]}
    while parent[0] is not None and parent[1] is not None:
        assert connection.in_atomic_block, "a mirrored frame is a second statement"
        # Frames mirrored from a grandchild already say where they come from.
        mirrored = [Frame(kind, {**origin, **data}) for kind, data in frames]
        frames, run_id = mirrored, parent[0]
        found = _write(Riding(sql.MIRROR_FRAMES), run_id, frames)
        if found is None:  # the ancestor has ended: its stream is closed
            break
        parent = found[1:3]


def _write(riding: Riding, run_id: str, frames: Sequence[Frame]) -> tuple[Any, ...] | None:
    """Number and insert ``frames`` in the run's stream; the statement's first row (``seq``,
    ``parent_run_id``, ``parent_tool_call_id``, extras), or ``None`` when it matched no run."""
    n = len(frames)
    written_frames = json.dumps([[kind, data] for kind, data in frames])
    params = [*riding.before, n, *riding.sets, run_id, run_id, n, timezone.now(), written_frames]
    written = rows.fetch_all(riding.statement, params)
    if not written:
        return None
    published(run_id, frames, [row[0] for row in written])
    return written[0]


def published(run_id: str, frames: Sequence[Frame], seqs: list[int]) -> None:
    """Publish after commit ``frames``, which a statement numbered ``seqs`` in the run's stream."""
    assert len(seqs) == len(frames), f"no run {run_id}"
    numbered = [
        {"seq": seq, "kind": kind, "data": data}
        for seq, (kind, data) in zip(sorted(seqs), frames, strict=True)
    ]
    transaction.on_commit(lambda: publish(run_id, numbered), robust=True)


def publish(run_id: str, frames: list[dict[str, Any]]) -> None:
    """Send committed frames to live subscribers; a subscriber that misses one reads the table.

    Queued on this process's broadcast loop: the committing driver does not wait for Redis.
    """
    broadcast.send(group_name(run_id), {"type": "run.frames", "frames": frames}, merge="frames")
