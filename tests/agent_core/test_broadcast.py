"""The broadcast thread's batching: a group's merging messages queued together leave as one."""

from __future__ import annotations

from typing import Any

from agent_core.engine import broadcast


def frames(*seqs: int) -> dict[str, Any]:
    return {"type": "run.frames", "frames": [{"seq": seq} for seq in seqs]}


def queued(group: str, message: dict[str, Any]) -> broadcast.Queued:
    return group, message, "frames" if message["type"] == "run.frames" else ""


def test_a_groups_frames_queued_together_leave_as_one_message_in_order():
    batch = [
        queued("agent_run.a", frames(1, 2)),
        queued("agent_run.b", frames(1)),
        queued("agent_run.a", frames(3)),
        queued("agent_run.b", frames(2, 3)),
    ]
    assert broadcast.merge(batch) == [
        ("agent_run.a", frames(1, 2, 3)),
        ("agent_run.b", frames(1, 2, 3)),
    ]


def test_another_message_of_the_group_is_never_overtaken():
    other: dict[str, Any] = {"type": "run.cancel"}
    batch = [frames(1), other, frames(2)]
    merged = broadcast.merge([queued("agent_run.a", message) for message in batch])
    assert merged == [("agent_run.a", message) for message in batch]


def test_messages_that_do_not_say_they_merge_leave_one_by_one():
    batch = [("agent_run.a", frames(1), ""), ("agent_run.a", frames(2), "")]
    assert broadcast.merge(batch) == [("agent_run.a", frames(1)), ("agent_run.a", frames(2))]


def test_messages_of_another_type_merging_on_another_list_stay_apart():
    events = {"type": "console.events", "events": [1]}
    batch = [("g", frames(1), "frames"), ("g", events, "events"), ("g", events, "events")]
    assert broadcast.merge(batch) == [
        ("g", frames(1)),
        ("g", {"type": "console.events", "events": [1, 1]}),
    ]


def test_the_queued_messages_are_left_as_they_were():
    first = frames(1)
    broadcast.merge([queued("agent_run.a", first), queued("agent_run.a", frames(2))])
    assert first == frames(1)
