"""Agents for the live tests and the benchmark, with a model that streams at a chosen pace.

The user's message picks the behaviour: ``slow`` streams a word every 20 ms for minutes (long
enough to be cancelled mid-call); ``fail`` fails with a detail that must not reach clients in
production; a number ``N`` streams ``N`` words as fast as it can.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from agent_core.agents import Agent
from agent_core.exceptions import ModelError
from agent_core.providers.base import Finish, ModelEvent, ModelRequest, TextDelta, Usage
from agent_core.tools import AbortSignal

SECRET_DETAIL = "upstream said: key sk-live-123 is over quota"


class LiveProvider:
    """The paced model of the live tests."""

    def __init__(self, name: str) -> None:
        self.name = name

    def stream(self, request: ModelRequest, *, abort: AbortSignal) -> Iterator[ModelEvent]:
        last = request.messages[-1].parts[0].get("text", "") if request.messages else ""
        if last.startswith("fail"):
            raise ModelError(SECRET_DETAIL)
        if last.startswith("slow"):
            words, pause = 10_000, 0.02
        else:
            words, pause = int(last) if last.isdigit() else 1000, 0.0
        for i in range(words):
            if abort.is_set():
                raise ModelError("aborted")
            yield TextDelta(f"w{i} ")
            if pause:
                time.sleep(pause)
        yield Usage(input_tokens=1, output_tokens=words)
        yield Finish("stop")


live_agent = Agent(name="live", instructions="Talk at the pace you are told.", model="live:paced")
