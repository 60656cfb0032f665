"""Pipelines and parallel branches (SPEC §14): agents whose model steps are planned, not asked.

A ``Pipeline`` hands its input to its first step's agent, that one's answer to the next, and
answers with the last one's. A ``Parallel`` hands its input to every branch at once and answers
with its ``merge`` over their answers (an agent, asked with every answer; or a function). Each
step or branch is an awaited delegation, so a child run with every guarantee of a single agent:
it may park on a person while the others carry on, and the composition's run resumes (once)
when the last one has ended. Its plan is read from its own transcript, never from memory, and
recorded as a model step, so a replay reads it back and a merge function's answer is recorded
once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .agents import Agent
from .providers.base import (
    Finish,
    ModelEvent,
    ModelMessage,
    ModelRequest,
    TextDelta,
    ToolCallPart,
    Usage,
)
from .tools import AbortSignal

Merge = Callable[[dict[str, str]], str]  # branch agent → its answer (or what became of it)


@dataclass(frozen=True)
class Reply:
    """What a composition's next step is: calls ``(agent, message)``, or its answer."""

    calls: list[tuple[str, str]] = field(default_factory=list)
    text: str = ""


@dataclass(frozen=True)
class _Planner:
    """A model provider that answers with a composition's plan."""

    plan: Callable[[str, list[dict[str, Any]]], Reply]

    def stream(self, request: ModelRequest, *, abort: AbortSignal) -> Iterator[ModelEvent]:
        given, results = _this_turn(request.messages)
        reply = self.plan(given, results)
        if reply.text or not reply.calls:
            yield TextDelta(reply.text or "(no answer)")
        for i, (agent, message) in enumerate(reply.calls):
            yield ToolCallPart(f"step_{i}", f"ask_{agent}", {"message": message})
        yield Usage()
        yield Finish("tool_calls" if reply.calls else "stop")


def _this_turn(messages: list[ModelMessage]) -> tuple[str, list[dict[str, Any]]]:
    """The turn's input (its user message) and the results its steps have had, in order."""
    results: list[dict[str, Any]] = []
    for message in reversed(messages):
        if message.role == "user":
            given = "".join(p.get("text", "") for p in message.parts if p.get("type") == "text")
            return given, results
        parts = [p for p in message.parts if p.get("type") == "tool_result"]
        results[:0] = parts
    return "", results


def as_text(result: dict[str, Any]) -> str:
    """A step's result as the next step's input."""
    output = result.get("output")
    return output if isinstance(output, str) else json.dumps(output, sort_keys=True)


@dataclass(frozen=True, kw_only=True)
class Pipeline(Agent):
    """``Pipeline(name=…, steps=[agent, …])``: each step's answer is the next one's input."""

    steps: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "steps", tuple(self.steps))
        if not self.steps:
            raise ValueError(f"pipeline {self.name}: no steps")
        object.__setattr__(self, "delegates", tuple(dict.fromkeys(self.steps)))
        object.__setattr__(self, "model", "composition:pipeline")
        super().__post_init__()

    def provider(self) -> _Planner:
        return _Planner(self.plan)

    def plan(self, given: str, results: list[dict[str, Any]]) -> Reply:
        if results and results[-1].get("is_error"):
            stopped = self.steps[len(results) - 1]
            return Reply(text=f"The pipeline stopped at {stopped}: {as_text(results[-1])}")
        if len(results) < len(self.steps):
            message = as_text(results[-1]) if results else given
            return Reply(calls=[(self.steps[len(results)], message)])
        return Reply(text=as_text(results[-1]))


@dataclass(frozen=True, kw_only=True)
class Parallel(Agent):
    """``Parallel(name=…, branches=[agent, …], merge=agent | function)``: every branch gets the
    input; ``merge`` gets their answers (an agent: as one message, a line per branch; a
    function: as ``{branch: answer}``) and its answer is the composition's."""

    branches: tuple[str, ...] = ()
    merge: str | Merge | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "branches", tuple(self.branches))
        if len(set(self.branches)) != len(self.branches) or not self.branches:
            raise ValueError(f"parallel {self.name}: branches must be distinct agents")
        merger = [self.merge] if isinstance(self.merge, str) else []
        object.__setattr__(self, "delegates", tuple(dict.fromkeys([*self.branches, *merger])))
        object.__setattr__(self, "model", "composition:parallel")
        super().__post_init__()

    def provider(self) -> _Planner:
        return _Planner(self.plan)

    def plan(self, given: str, results: list[dict[str, Any]]) -> Reply:
        if not results:
            return Reply(calls=[(branch, given) for branch in self.branches])
        if len(results) > len(self.branches):  # the merge agent answered
            return Reply(text=as_text(results[-1]))
        answers = {r["tool_name"][len("ask_") :]: as_text(r) for r in results}
        if isinstance(self.merge, str):
            lines = "\n".join(f"{branch}: {answer}" for branch, answer in answers.items())
            return Reply(calls=[(self.merge, lines)])
        if self.merge is None:
            return Reply(text="\n".join(f"{b}: {a}" for b, a in answers.items()))
        return Reply(text=self.merge(answers))
