"""Delegation (SPEC §14): a call that starts a child run of another agent.

An awaited delegation (``ask_<agent>``) claims its call (``approved → executing``), starts the
child and parks the parent in one transaction; the child's end settles the call and re-queues
the parent in another (``runs._answer_parent``). A detached one (``start_<agent>``) succeeds at
once with the child's run id. Depth and cycles are checked when the call is proposed, so a
refused delegation never reaches a person.
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from .. import signals
from ..actors import Actor
from ..agents import get_agent
from ..choices import CallStatus
from ..conf import agent_settings
from ..engine import frames, journal, rows, sql, state, stream_log
from ..engine.dispatch import NextStep
from ..engine.leases import Lease, lock
from ..engine.runs import continue_or_park, start_run
from ..exceptions import AgentNotFound, InvalidTransition
from ..models import Run, ToolCall
from ..tools import ToolSpec


def chain(run_id: str) -> list[str]:
    """The agents from the root run down to ``run_id``'s (``["support", "billing"]``)."""
    return [row["agent"] for row in reversed(rows.fetch_rows(sql.ANCESTRY, {"run_id": run_id}))]


def chain_of(run: Run) -> list[str]:
    """``chain`` of a run already read: no query for a run nobody delegated to."""
    return [run.agent] if run.parent_run_id is None else chain(run.pk)


def refusal(run: Run, agent: str) -> str | None:
    """Why ``run`` may not delegate to ``agent`` (a tool error the model sees), or ``None``."""
    try:
        get_agent(agent)
    except AgentNotFound as exc:
        return f"agent_not_found: {exc.message}"
    agents = chain(run.pk)
    path = " → ".join([*agents, agent])
    if agent in agents:
        return f"delegation_cycle: {path} would hand the work back to an agent already on it."
    limit = agent_settings().MAX_DELEGATION_DEPTH
    if len(agents) > limit:
        return f"delegation_depth_exceeded: {path} is deeper than {limit} delegations."
    return None


def start_child(lease: Lease, call: ToolCall, tool: ToolSpec) -> NextStep:
    """The delegation step of an approved call: start its child run, in one transaction with
    the call's claim and (awaited) the parent's parking. Returns what the parent does next."""
    now = timezone.now()
    # No savepoint when nested (the driver opens the next step in it): one transaction.
    with transaction.atomic(savepoint=False):
        run = lock(lease)
        actor = Actor(ref=run.actor_ref, roles=frozenset(run.actor_roles))
        held = ToolCall.objects.filter(pk=call.pk, run=run)
        target = CallStatus.SUCCEEDED if tool.detached else CallStatus.EXECUTING
        claimed = state.transition(
            held,
            CallStatus.APPROVED,
            target,
            fence=lease.token,
            attempts=F("attempts") + 1,
            started_at=now,
        )
        if not claimed:
            raise InvalidTransition(f"{call.pk} is not approved")
        child = start_run(
            agent=tool.delegate,
            message=str(call.args.get("message", "")),
            actor=actor,
            parent=run,
            parent_tool_call_id=None if tool.detached else call.pk,
        )
        announce = [frames.delegated(call.pk, child.pk, tool.delegate)]
        if tool.detached:
            result = {"run_id": child.pk}
            held.update(result=result, finished_at=now)
            journal.record_tool_step(run, call.pk, CallStatus.SUCCEEDED.value)
            announce.append(frames.tool_output(call.pk, result))
        stream_log.emit(run.pk, announce)
        transaction.on_commit(lambda: signals.delegated.send(ToolCall, call=call, child_run=child))
        return continue_or_park(run)
