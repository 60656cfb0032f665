"""How a followed stream ends: ``done``, or ``error`` with a generic message in production."""

from __future__ import annotations

import pytest
from django.test import override_settings

from agent_core import live
from agent_core.sse import format_event, parse_after


@pytest.mark.parametrize(("expose", "message"), [(False, "The run failed."), (True, "quota gone")])
def test_a_failed_run_ends_with_an_error_event(expose, message):
    with override_settings(AGENT={"AGENTS": [], "EXPOSE_ERROR_DETAILS": expose}):
        event = live._closing("failed", "model_error", "quota gone")
    assert event == live.Event("error", {"code": "model_error", "message": message})
    assert format_event(event) == (
        f'event: error\ndata: {{"code":"model_error","message":"{message}"}}\n\n'.encode()
    )


def test_completed_and_cancelled_runs_end_with_done():
    assert live._closing("cancelled", "cancelled", "cancelled by user:alice") == live.Event(
        "done", {"status": "cancelled"}
    )
    frame = live.Event("frame", {"kind": "cancelled"}, 7)
    assert format_event(frame) == b'id: 7\ndata: {"kind":"cancelled"}\n\n'
    assert format_event(live.Event("keepalive")) == b": keep-alive\n\n"


@pytest.mark.parametrize(
    ("query", "header", "after"),
    [
        (None, None, 0),
        ("5", "9", 5),
        (None, "9", 9),
        ("", None, 0),
        ("x", None, None),
        (None, "-1", None),
    ],
)
def test_after_wins_over_last_event_id(query, header, after):
    assert parse_after(query, header) == after
