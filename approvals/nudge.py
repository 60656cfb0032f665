"""Nudge: an operator tells the people a waiting call waits on about it again.

The notifications are recorded as at the request (``notify.delivery``: one ``Delivery`` per
channel and person, event ``approval-nudged``) to the policy's recipients now, so a role's new
holder is told too; the nudge is audited as a ``nudge`` decision attempt of the operator's, in
the same transaction, under the run's lock (a call decided meanwhile is not nudged).
"""

from __future__ import annotations

from agent_core.access import is_operator
from agent_core.actors import Actor
from agent_core.choices import CallStatus
from agent_core.decisions import decision
from agent_core.exceptions import NotAllowed, NotFound

from .models import Action, DecisionAttempt
from .notify import delivery
from .notify.notice import NUDGED

WAITING = (CallStatus.PENDING_APPROVAL, CallStatus.PENDING_INPUT)


def nudge(call_id: str, *, actor: Actor, via: str) -> int:
    """Notify ``call_id``'s deciders again; how many notifications were recorded."""
    if not is_operator(actor):
        raise NotAllowed("Only an operator may nudge the people a call waits on.")
    with decision(call_id) as held:
        if held is None:
            raise NotFound("no such tool call")
        run, call = held.run, held.call
        if call.status not in WAITING:
            raise NotAllowed("This call no longer waits on anyone.")
        told = delivery.record([call], event=NUDGED)
        DecisionAttempt.objects.create(
            tool_call_id=call.pk,
            run_id=run.pk,
            thread_id=call.thread_id,
            tool_name=call.tool_name,
            action=Action.NUDGE,
            actor_ref=actor.ref,
            via=via,
            outcome="applied",
            detail=f"notified again ({told} notifications)",
        )
    return told
