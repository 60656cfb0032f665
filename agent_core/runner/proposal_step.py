"""A proposal run's steps (SPEC §17), through the loop's one hook, ``next_step``: right before
the proposal's call runs, ask again whether it may (its tool and the tool's current schema, its
requester, the policy: ``proposal_drift`` else, recorded, nothing run); once the call has ended,
append its outcome to the thread as one message (``outcomes``) and end the run, with no model
step."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

import pydantic
from django.db import transaction

from .. import signals
from ..agents import Agent
from ..choices import CallStatus, Role, RunStatus
from ..engine import calls, transcript
from ..engine.leases import Lease
from ..engine.outcomes import outcome_part
from ..engine.runs import end_run
from ..exceptions import ProposalDrift, ToolNotFound
from ..gate import get_gate
from ..models import Run, ToolCall
from .plan import CallModel, Plan, RunTool

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Concluded:
    """The proposal run ended in the transaction that planned its step: nothing to take."""


def next_step(lease: Lease, run: Run, agent: Agent, step: Plan) -> Plan | Concluded:
    """The loop's hook for a proposal run, given the step ``plan`` found: check the call again
    right before it runs; once it has ended, tell the thread and end the run."""
    match step:
        case RunTool(call):
            refusal = _drift(agent, call)
            if not refusal:
                return step
            logger.info("proposal %s refused before running: %s", call.pk, refusal)
            calls.refuse_call(lease, call.pk, reason=f"{ProposalDrift.code}: {refusal}")
            _conclude(run, ToolCall.objects.get(pk=call.pk), code=ProposalDrift.code)
            return Concluded()
        case CallModel(previous=(call,)):  # the call has ended
            _conclude(run, call)
            return Concluded()
    return step  # parked on its decision, or a call in doubt to recover


def _drift(agent: Agent, call: ToolCall) -> str:
    """Why the approved proposal may no longer run ("" when it may)."""
    try:
        tool = agent.get_tool(call.tool_name)
    except ToolNotFound:
        return f"the agent no longer has the tool {call.tool_name}"
    try:
        tool.validate_args(call.args)
    except pydantic.ValidationError as exc:
        errors = json.loads(exc.json(include_url=False, include_context=False))
        return f"its arguments no longer fit the tool's schema: {errors}"
    return get_gate().may_run(call, tool=tool)


def _conclude(run: Run, call: ToolCall, *, code: str = "") -> None:
    """The proposal's outcome, appended to the thread as one message (none for a superseded
    one: the model replaced it itself), what its decision deferred, and the run's end."""
    if call.status != CallStatus.SUPERSEDED:
        transcript.append(run, Role.USER, [outcome_part(call)])
    get_gate().proposal_ended(call)
    message = call.reason if code else ""
    if end_run(run, RunStatus.COMPLETED, code=code, message=message):
        transaction.on_commit(lambda: signals.run_finished.send(Run, run=run))
