"""Replay from the table: superseded text is sent as it was streamed, flagged."""

from __future__ import annotations

import pytest

from agent_core import live
from agent_core.models import StreamFrame

pytestmark = pytest.mark.django_db


def test_superseded_text_is_replayed_with_its_id_and_flagged(turn):
    run = turn("hello there")
    text = StreamFrame.objects.filter(run=run, kind="text").first()
    assert text is not None
    StreamFrame.objects.filter(pk=text.pk).update(superseded=True)
    frames = live._frames_after(run.pk, 0)
    assert [seq for seq, _, _ in frames] == list(range(1, len(frames) + 1))
    flagged = {seq: data.get("superseded", False) for seq, _, data in frames}
    assert flagged[text.seq] is True
    assert sum(flagged.values()) == 1
