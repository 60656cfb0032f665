"""The run's next step, as a pure match over its journal and its calls (SPEC §5, 12).

``plan`` reads nothing but what it is given (the run's journal and its calls, read with the run in
one query), so the same database always plans the same step, on any process, after any crash; a
journal the deployed code does not reach fails the run with ``replay_diverged``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from ..choices import CALL_PENDING, CallStatus, StepStatus
from ..exceptions import ReplayDiverged
from ..models import ToolCall


@dataclass(frozen=True)
class CallModel:
    index: int
    previous: tuple[ToolCall, ...] = ()  # the settled calls of the step before


@dataclass(frozen=True)
class RunTool:
    call: ToolCall


@dataclass(frozen=True)
class Recover:
    call: ToolCall


@dataclass(frozen=True)
class Park:
    pass


@dataclass(frozen=True)
class Finish:
    pass


Plan: TypeAlias = CallModel | RunTool | Recover | Park | Finish


def plan(journal: dict[str, str], every_call: list[ToolCall]) -> Plan:
    """The next step, read from the journal and the calls of the last model step
    (``every_call``: the run's, as ``journal.read_run`` reads them)."""
    model_steps = sorted(int(name[4:]) for name in journal if name.startswith("llm:"))
    if model_steps != list(range(len(model_steps))):
        raise ReplayDiverged(f"the journal has model steps {model_steps}; the loop takes 0, 1, …")
    if not model_steps:
        return CallModel(0)
    last = model_steps[-1]
    if journal[f"llm:{last}"] == StepStatus.STARTED:
        return CallModel(last)
    calls = [c for c in every_call if c.step_name == f"llm:{last}"]
    _check_tool_steps(journal, every_call, calls)
    if not calls:
        return Finish()
    # An executing delegation waits on its child run (SPEC §14); any other call left executing
    # or in doubt was cut short by a crash.
    waiting = [c for c in calls if c.status == CallStatus.EXECUTING and _delegated(c)]
    for call in calls:
        if call.status in (CallStatus.EXECUTING, CallStatus.IN_DOUBT) and call not in waiting:
            return Recover(call)
    for call in calls:
        if call.status == CallStatus.APPROVED:
            return RunTool(call)
    if waiting or any(call.status in CALL_PENDING for call in calls):
        return Park()
    return CallModel(last + 1, tuple(calls))


def _delegated(call: ToolCall) -> bool:
    """Whether the call started a child run (``journal.read_run`` reads it with the call)."""
    return bool(getattr(call, "delegated", False))


def _check_tool_steps(
    journal: dict[str, str], every_call: list[ToolCall], calls: list[ToolCall]
) -> None:
    tool_steps = {name[5:] for name in journal if name.startswith("tool:")}
    if not tool_steps:
        return
    unknown = tool_steps - {call.pk for call in every_call}
    if unknown:
        raise ReplayDiverged(f"the journal names tool steps of no call of this run: {unknown}")
    for call in calls:
        if call.pk in tool_steps and not call.is_terminal:
            raise ReplayDiverged(f"the journal says {call.pk} ran but the call is {call.status}")
