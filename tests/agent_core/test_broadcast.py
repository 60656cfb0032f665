"""The broadcast thread's batching: a run's frames queued together leave as one message."""

from __future__ import annotations

from typing import Any

from agent_core import broadcast


def frames(*seqs: int) -> dict[str, Any]:
    return {"type": broadcast.FRAMES, "frames": [{"seq": seq} for seq in seqs]}


def test_a_groups_frames_queued_together_leave_as_one_message_in_order():
    batch = [
        ("agent_run.a", frames(1, 2)),
        ("agent_run.b", frames(1)),
        ("agent_run.a", frames(3)),
        ("agent_run.b", frames(2, 3)),
    ]
    assert broadcast.merge(batch) == [
        ("agent_run.a", frames(1, 2, 3)),
        ("agent_run.b", frames(1, 2, 3)),
    ]


def test_another_message_of_the_group_is_never_overtaken():
    other: dict[str, Any] = {"type": "run.cancel"}
    batch = [("agent_run.a", frames(1)), ("agent_run.a", other), ("agent_run.a", frames(2))]
    assert broadcast.merge(batch) == batch


def test_the_queued_messages_are_left_as_they_were():
    first = frames(1)
    broadcast.merge([("agent_run.a", first), ("agent_run.a", frames(2))])
    assert first == frames(1)
