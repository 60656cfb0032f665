"""Independent proposals (SPEC §17): an action call that waits for its decision apart from its
run.

When a model step proposes a call of a tool whose approval mode is ``"independent"``,
``propose`` (in the suspend transaction) makes the call a *proposal*: a run of kind
``proposal``, on the same thread, holding one call with the gate's answer — an ordinary pending
call, in the inbox and every decision surface. The turn's own call succeeds at once with
``{proposal_id, status, executed: false}``, so the turn goes on and ends.

A decision queues the proposal run like any parked run, and the same runners drive it, under its
lease, through the same tool step (``runner.proposal_step`` checks it again before it runs and
tells the thread how it ended). A newer proposal with the same ``replacement_key`` supersedes
older pending ones in the transaction that records it.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import transaction
from django.utils import timezone

from .. import ids, signals
from ..actors import SYSTEM
from ..agents import get_agent
from ..choices import CallStatus, RunKind, RunStatus, StepStatus
from ..conf import agent_settings
from ..engine import dispatch, frames, stream_log
from ..engine.decisions import decision
from ..engine.dispatch import NextStep
from ..engine.frames import Frames
from ..engine.leases import deadline
from ..exceptions import ToolNotFound
from ..gate import get_gate
from ..models import Run, Step, ToolCall

# The one step of a proposal run's journal that stands for the model step that proposed it: the
# loop plans the call from it as from any recorded step.
PROPOSED_STEP = "llm:0"
# ``decided_via`` of a proposal superseded by a newer one (a system value, SPEC §7).
REPLACEMENT = "replacement"

Review = Callable[[ToolCall, Run], None]


def is_independent(turn: Run, row: ToolCall) -> bool:
    """Whether ``row``, a call of ``turn`` proposed to the gate, becomes an independent
    proposal."""
    agent = get_agent(turn.agent)
    try:
        tool = agent.get_tool(row.tool_name)
    except ToolNotFound:
        return False
    return agent.approval_mode_of(tool) == "independent"


def propose(turn: Run, row: ToolCall, review: Review) -> None:
    """In the suspend transaction of ``turn``: make the call ``row`` (not yet written) an
    independent proposal, reviewed by the gate (``review`` stamps its answer on it); ``row``
    becomes what the turn's model reads. A call the gate refuses stays the turn's, refused."""
    tool = get_agent(turn.agent).get_tool(row.tool_name)
    run = Run(
        kind=RunKind.PROPOSAL,
        thread=turn.thread,
        agent=turn.agent,
        actor_ref=turn.actor_ref,
        actor_roles=turn.actor_roles,
        runner=agent_settings().RUNNER,
        status=RunStatus.WAITING,
        lease_expires_at=None,
    )
    proposal = ToolCall(
        id=ids.tool_call_id(),
        run=run,
        thread_id=turn.thread_id,
        message_id=row.message_id,  # the assistant message that proposed it
        step_name=PROPOSED_STEP,
        position=0,
        provider_call_id=row.provider_call_id,
        tool_name=row.tool_name,
        kind=row.kind,
        args=row.args,
        args_digest=row.args_digest,
        status=CallStatus.PROPOSED,
        requester_ref=row.requester_ref,
        confirmation=row.confirmation,
        replacement_key=tool.replacement_key_of(row.args)[:200],
    )
    review(proposal, run)
    if proposal.status == CallStatus.REFUSED:
        row.status, row.reason = proposal.status, proposal.reason
        row.requires_approval, row.finished_at = proposal.requires_approval, proposal.finished_at
        return
    if proposal.status == CallStatus.APPROVED:  # no one need say yes: it executes at once
        run.status, run.lease_expires_at = RunStatus.QUEUED, deadline()
        dispatch.on_commit(run.pk, NextStep.TOOL)
    run.save(force_insert=True)
    Step.objects.create(
        run=run,
        name=PROPOSED_STEP,
        status=StepStatus.COMPLETED,
        output={"proposed_by": row.pk, "turn": turn.pk},
        finished_at=timezone.now(),
    )
    proposal.save(force_insert=True)
    stream_log.emit(run.pk, _announced(proposal))
    if proposal.status == CallStatus.PENDING_APPROVAL:
        get_gate().requested([proposal])
    transaction.on_commit(lambda: _signal(run, proposal))
    if proposal.replacement_key:
        _supersede_older(proposal)
    row.status, row.finished_at = CallStatus.SUCCEEDED, timezone.now()
    row.result = {
        "proposal_id": proposal.pk,
        "status": "pending" if proposal.status == CallStatus.PENDING_APPROVAL else "approved",
        "executed": False,
    }


def _announced(proposal: ToolCall) -> Frames:
    announce = [frames.tool_input_available(proposal)]
    if proposal.status == CallStatus.PENDING_APPROVAL:
        announce.append(frames.approval_requested(proposal))
    else:
        announce.append(frames.approval_settled(proposal))
    return announce


def _signal(run: Run, proposal: ToolCall) -> None:
    signals.run_started.send(Run, run=run)
    signals.tool_call.send(ToolCall, call=proposal)
    if proposal.status == CallStatus.PENDING_APPROVAL:
        signals.approval_requested.send(ToolCall, call=proposal)
    else:
        signals.approval_settled.send(ToolCall, call=proposal)


def _supersede_older(proposal: ToolCall) -> None:
    """Older pending proposals of the same thread, tool and key end ``superseded``, each under
    its run's lock, with its frame; their runs end without telling the thread."""
    older = (
        ToolCall.objects.filter(
            thread_id=proposal.thread_id,
            tool_name=proposal.tool_name,
            replacement_key=proposal.replacement_key,
            status=CallStatus.PENDING_APPROVAL,
            run__kind=RunKind.PROPOSAL,
        )
        .exclude(pk=proposal.pk)
        .order_by("requested_at")
        .values_list("pk", flat=True)
    )
    for call_id in list(older):
        with decision(call_id) as held:
            if held is None or held.call.status != CallStatus.PENDING_APPROVAL:
                continue  # decided meanwhile: approved or running ones still run
            held.settle(
                CallStatus.SUPERSEDED,
                decided_by_ref=SYSTEM.ref,
                decided_via=REPLACEMENT,
                reason=f"superseded by {proposal.pk}",
            )
