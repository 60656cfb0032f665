"""Nudge: an operator tells the people a waiting call waits on about it again.

The notifications are recorded as at the request (``notify.delivery``: one ``Delivery`` per
channel and person, event ``approval-nudged``) to the policy's recipients now, so a role's new
holder is told too. It is a decision attempt (``attempts.attempt``): under the run's lock (a call
decided meanwhile is not nudged), 404 for a call the operator may not see, and audited as a
``nudge`` row of the operator's whatever came of it.
"""

from __future__ import annotations

from agent_core.actors import Actor
from agent_core.choices import CallStatus
from agent_core.engine.access import is_operator
from agent_core.exceptions import NotAllowed

from .attempts import Attempt, Result, attempt
from .models import Action
from .notify import delivery
from .notify.notice import NUDGED

WAITING = (CallStatus.PENDING_APPROVAL, CallStatus.PENDING_INPUT)


def nudge(call_id: str, *, actor: Actor, via: str) -> int:
    """Notify ``call_id``'s deciders again; how many notifications were recorded."""
    told = 0

    def decide(current: Attempt) -> Result:
        nonlocal told
        if not is_operator(actor):
            raise NotAllowed("Only an operator may nudge the people a call waits on.")
        if current.decision.call.status not in WAITING:
            raise NotAllowed("This call no longer waits on anyone.")
        told = delivery.record([current.decision.call], event=NUDGED)
        current.note = f"notified again ({told} notifications)"
        return Result.APPLIED

    attempt(call_id, Action.NUDGE, actor, via, decide)
    return told
