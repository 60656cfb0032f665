"""Who may see, follow and cancel a thread or a run (SPEC §7, §8): one rule for the REST API,
the streams, the console and the approval port.

* The thread's owner (``owner_ref``) sees and manages its threads and runs.
* ``AGENT["OPERATOR_ROLE"]`` (default ``operator``) sees and may cancel every run.
* An approver sees the runs and threads holding a call it is the approver of (a role it has;
  the ``requester`` marker is matched only as the owner, never as a role name), or a call the
  approval gate says it may decide otherwise (an escalation), so it can follow what it decides;
  it may not cancel them or delete the thread (403).
* Anyone else gets 404: the id might as well not exist.

The console shows what these functions return, the streams follow only what they allow, and the
approval port answers 404 for a call outside them that the policy does not let the actor decide
(``approvals.guards.may_see``).
"""

from __future__ import annotations

from typing import Any, cast

from django.db.models import Exists, OuterRef, Q, QuerySet

from .. import approvers
from ..actors import Actor
from ..choices import REQUESTER
from ..conf import agent_settings
from ..exceptions import NotAllowed
from ..gate import cases_of, get_gate
from ..models import Run, Thread, ToolCall
from . import rows, sql


def is_operator(actor: Actor) -> bool:
    return actor.has_role(agent_settings().OPERATOR_ROLE)


def _roles(actor: Actor) -> list[str]:
    """The roles whose calls ``actor`` approves (the ``requester`` marker is never a role)."""
    return sorted(actor.roles - {REQUESTER})


def _approves(actor: Actor, **on: OuterRef) -> Exists:
    roles = _roles(actor)
    approver = Q(approver__in=roles)
    if roles:
        approver |= approvers.one_of(roles)
    return Exists(ToolCall.objects.filter(approver | get_gate().decidable(actor), **on))


def visible_threads(actor: Actor) -> QuerySet[Thread]:
    """Threads the actor may read."""
    threads = Thread.objects.all()
    if is_operator(actor):
        return threads
    return threads.filter(Q(owner_ref=actor.ref) | _approves(actor, thread=OuterRef("pk")))


def visible_runs(actor: Actor) -> QuerySet[Run]:
    """Runs the actor may read and follow."""
    runs = Run.objects.all()
    if is_operator(actor):
        return runs
    return runs.filter(Q(thread__owner_ref=actor.ref) | _approves(actor, run=OuterRef("pk")))


def visible_calls(actor: Actor) -> QuerySet[ToolCall]:
    """Calls the actor may read: those of the runs it may see."""
    calls = ToolCall.objects.all()
    if is_operator(actor):
        return calls
    return calls.filter(run__in=visible_runs(actor).values("pk"))


def in_visible_runs(actor: Actor, calls: QuerySet[ToolCall]) -> QuerySet[ToolCall]:
    """``calls`` narrowed to those of runs the actor may see, for an inbox's few thousand calls.

    The same rule as ``visible_calls``, asked from the other side: the threads the actor owns
    and the runs it may see as an approver are gathered first, one index walk per reason (its
    roles as the stored approver, ``call_approver_run`` and ``call_any_of_roles_run``; each case
    of the gate's ``decidable``), and ``calls`` are tested against those two sets (waiting calls
    from their covering index ``call_pending_by_run``). Testing each call's run instead read every
    call of it from the heap (0.7-0.9 s for 7,000 pending calls at 1M calls), and
    ``visible_calls`` tests every run the actor may see (seconds).
    """
    if is_operator(actor):
        return calls
    owned = Thread.objects.filter(owner_ref=actor.ref).values("pk")
    return calls.filter(Q(thread_id__in=owned) | Q(run_id__in=_approved_run_ids(actor)))


def _approved_run_ids(actor: Actor) -> QuerySet[ToolCall, Any]:
    """The ids of the runs ``actor`` may see as an approver, as one ``UNION ALL``."""
    calls = ToolCall.objects.order_by().values("run_id")
    reasons = [calls.filter(case) for case in cases_of(get_gate().decidable(actor))]
    if roles := _roles(actor):
        # A role approves many calls of a run: each run once (the index walk is in run order).
        reasons += [
            calls.filter(approver__in=roles).distinct(),
            calls.filter(approvers.one_of(roles)),
        ]
    return reasons[0].union(*reasons[1:], all=True)


def visible_run(actor: Actor, run_id: str) -> Run | None:
    """The run if the actor may read and follow it, else ``None``.

    Its owner, who follows a run most often, is found by a named statement (the first case of
    ``visible_runs``): the full rule's approver subquery costs a few milliseconds of Python, and
    compiling even the plain lookup was most of a reader thread's time while a thousand streams
    attached at once.
    """
    owned = rows.fetch_models(sql.OWNED_RUN, {"run_id": run_id, "owner_ref": actor.ref}, Run)
    if owned is not None:
        return cast(Run, owned[0][0])
    return visible_runs(actor).filter(pk=run_id).first()


def may_see_run(actor: Actor, run_id: str) -> bool:
    """Whether the actor may see the run (and so its calls)."""
    return is_operator(actor) or visible_runs(actor).filter(pk=run_id).exists()


def check_may_cancel(actor: Actor, run: Run) -> None:
    """The owner and operators may cancel a run they can see; others get 403."""
    if run.thread.owner_ref != actor.ref and not is_operator(actor):
        raise NotAllowed("Only the thread's owner or an operator may cancel this run.")


def check_may_manage(actor: Actor, thread: Thread) -> None:
    """Only the owner writes to or deletes a thread; others who can see it get 403."""
    if thread.owner_ref != actor.ref:
        raise NotAllowed("Only the thread's owner may do this.")
