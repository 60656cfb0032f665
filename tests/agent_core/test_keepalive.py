"""A keep-alive is no event to a client: not even to one that keeps the last id across events
(httpx-sse), which handed a keep-alive ended by a blank line to the application as the frame
before it, a second time (found across a Redis restart: ``tests/faults/test_restarts.py``)."""

from __future__ import annotations

from httpx_sse._decoders import SSEDecoder

from agent_core.streams import sse
from agent_core.streams.aisdk import encode
from agent_core.streams.live import Event


def _events(body: bytes) -> list[tuple[str, str]]:
    decoder = SSEDecoder()
    decoded = (decoder.decode(line) for line in body.decode().splitlines())
    return [(event.id, event.data) for event in decoded if event is not None]


def test_a_keepalive_after_a_frame_is_no_event() -> None:
    frame = Event("frame", {"kind": "approval-settled"}, 5)
    body = sse.block([frame, Event("keepalive")]) + sse.block([Event("keepalive")])
    assert _events(body) == [("5", '{"kind":"approval-settled"}')]


def test_an_ai_sdk_keepalive_after_a_frame_is_no_event() -> None:
    frame = Event("frame", {"kind": "step-start", "step": "llm:0", "attempt": 1}, 5)
    body = encode([frame, Event("keepalive")])
    assert _events(body) == _events(encode([frame]))
