"""Per-run limits (SPEC §16): model steps, tool calls, and a model stuck in a loop.

``check`` is asked about every step the loop plans, before it opens it, from what the plan read
(the run's calls in the order its steps proposed them), so a replay after a crash decides the same.
Past ``MAX_STEPS_PER_RUN`` model steps or ``MAX_TOOL_CALLS_PER_RUN`` calls the run fails with
``run_limit_exceeded``, before the step past the limit runs. The same tool called with canonically
equal arguments ``TOOL_LOOP_LIMIT`` times in a row is a loop: the first model step to end in one is
followed by one more, whose request tells the model (a note on the last result); a second one ends
the run with ``tool_loop_detected``. An agent may set its own limits (``Agent.max_steps_per_run``…).
"""

from __future__ import annotations

from itertools import groupby
from typing import Any

from ..agents import Agent
from ..conf import agent_settings
from ..exceptions import RunLimitExceeded, ToolLoopDetected
from ..models import ToolCall
from ..tools import args_digest
from .plan import CallModel, Plan, Recover


def check(agent: Agent, step: Plan, every_call: list[ToolCall]) -> str | None:
    """Raise when ``step`` would go past a limit of the run; else the note the model is told
    with the results of the step before (``told``), when that step ended in a first loop."""
    if isinstance(step, Recover):  # a call a crash cut short is settled whatever the limits
        return None
    settings = agent_settings()
    steps = _limit(agent.max_steps_per_run, settings.MAX_STEPS_PER_RUN)
    if isinstance(step, CallModel) and step.index >= steps:
        raise RunLimitExceeded(f"the run reached its limit of {steps} model steps")
    calls = _limit(agent.max_tool_calls_per_run, settings.MAX_TOOL_CALLS_PER_RUN)
    if len(every_call) > calls:
        raise RunLimitExceeded(f"the model proposed more than {calls} tool calls in this run")
    return _loop(every_call, _limit(agent.tool_loop_limit, settings.TOOL_LOOP_LIMIT))


def told(results: list[dict[str, Any]], note: str | None) -> list[dict[str, Any]]:
    """``results`` (a ``tool`` message's parts) with ``note`` on the last one's output."""
    if note is None or not results:
        return results
    last = results[-1]
    return [*results[:-1], {**last, "output": {"result": last["output"], "note": note}}]


def _limit(own: int | None, default: int) -> int:
    return default if own is None else own


def _loop(every_call: list[ToolCall], limit: int) -> str | None:
    """Raise on the second model step to end with ``limit`` equal calls in a row or more; the
    note for the model when the last step is the first."""
    streak, looped, ended_in_loop = 0, 0, False
    last: ToolCall | None = None
    for _, calls in groupby(every_call, key=lambda call: call.step_name):
        for call in calls:
            same = last is not None and _digest(call) == _digest(last)
            streak, last = (streak + 1 if same else 1), call
        ended_in_loop = streak >= limit
        looped += ended_in_loop
    if last is None or not ended_in_loop:  # no loop, or the model left it when told
        return None
    if looped > 1:
        raise ToolLoopDetected(
            f"the model called {last.tool_name} with the same arguments {streak} times in a row, "
            "again after it was told it was looping"
        )
    return (
        f"You have called {last.tool_name} with these same arguments {streak} times in a row. "
        "Do not call it with them again: answer with what you have, or try something else."
    )


def _digest(call: ToolCall) -> str:
    """The call as the model proposed it (a decider may have edited its arguments since)."""
    if call.original_args is None:
        return call.args_digest
    return args_digest(call.tool_name, call.original_args)
