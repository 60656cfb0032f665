"""Cancelling a run (SPEC §5, guarantee 11).

A run no driver holds is settled at once; a driven one goes ``cancelling`` and its driver settles
it at its next safe point (``finish_cancel``), or the sweeper does once that driver's lease ran
out (``settle_abandoned_cancels``). Children are cancelled with their parent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from .. import signals
from ..actors import Actor
from ..choices import CALL_PENDING, RUN_ACTIVE, RUN_TERMINAL, CallStatus, RunStatus
from ..exceptions import NotFound
from ..models import Run, ToolCall
from . import access, clock, frames, state, stream_log
from .frames import Frames
from .leases import Lease, lock_run
from .runs import end_run, report_unreported_calls

logger = logging.getLogger(__name__)


def request_cancel(run_id: str, *, actor: Actor) -> Run:
    """Cancel a run for ``actor`` (SPEC §8), as every surface does: ``NotFound`` for a run it may
    not see, ``NotAllowed`` for one it may not cancel (``access.check_may_cancel``); else as
    ``cancel_run``. A finished run, or one already being cancelled, is answered as it is."""
    run = access.visible_run(actor, run_id)
    if run is None:
        raise NotFound(f"no run {run_id}")
    access.check_may_cancel(actor, run)
    return cancel_run(run_id, actor_ref=actor.ref)


def cancel_run(run_id: str, *, actor_ref: str) -> Run:
    """Cancel a run, whoever asks (its parent's cancel, the sweeper): settled at once when no
    driver holds it, else ``cancelling`` until its driver reaches a safe point. Children are
    cancelled too. A finished run is left as it is."""
    with transaction.atomic():
        run = lock_run(run_id)
        if run.is_terminal or run.status == RunStatus.CANCELLING:
            return run
        driven = (
            run.status == RunStatus.RUNNING
            and run.lease_owner != ""
            and run.lease_expires_at is not None
            and run.lease_expires_at > clock.now()
        )
        if driven:
            state.transition(
                Run.objects.filter(pk=run.pk),
                RunStatus.RUNNING,
                RunStatus.CANCELLING,
                cancel_requested=True,
            )
            run.status, run.cancel_requested = RunStatus.CANCELLING, True
            logger.info("run %s: cancel requested by %s", run.pk, actor_ref)
        else:
            Run.objects.filter(pk=run.pk).update(cancel_requested=True)
            _settle(run, actor_ref=actor_ref)
        # Each child once this lock is let go: a child's lock is always taken before its
        # parent's (its end answers the parent; its frames go to the parent's stream too).
        transaction.on_commit(lambda: cancel_children(run.pk, actor_ref=actor_ref))
        return run


def cancel_children(run_id: str, *, actor_ref: str) -> None:
    """Cancel the run's active child runs (and theirs)."""
    children = Run.objects.filter(parent_run_id=run_id, status__in=RUN_ACTIVE)
    for child_id in children.values_list("pk", flat=True):
        cancel_run(child_id, actor_ref=actor_ref)


def cancel_orphans(limit: int = 100) -> int:
    """Sweeper: child runs still active whose parent waited on them and has ended (it died, or
    a crash came between its cancel and its children's) are cancelled (SPEC §14)."""
    orphans = Run.objects.filter(
        status__in=RUN_ACTIVE,
        parent_tool_call__isnull=False,
        parent_run__status__in=RUN_TERMINAL,
    ).exclude(status=RunStatus.CANCELLING)
    found = list(orphans.values_list("pk", flat=True)[:limit])
    for run_id in found:
        cancel_run(run_id, actor_ref="")
    return len(found)


def finish_cancel(lease: Lease) -> bool:
    """The driver reached a safe point of a run being cancelled: settle it; ``False`` when the
    run is not being cancelled (or this lease no longer holds it)."""
    with transaction.atomic():
        run = (
            Run.objects.select_for_update()
            .select_related("thread")
            .filter(
                pk=lease.run_id,
                lease_token=lease.token,
                lease_owner=lease.owner,
                status=RunStatus.CANCELLING,
            )
            .first()
        )
        if run is None:
            return False
        _settle(run, actor_ref="")
        return True


def settle_abandoned_cancels(limit: int = 100) -> int:
    """Sweeper: runs left ``cancelling`` by a driver that died are settled once its lease ends."""
    settled = 0
    stale = Run.objects.filter(status=RunStatus.CANCELLING).filter(
        Q(lease_expires_at__lt=clock.now()) | Q(lease_expires_at__isnull=True)
    )
    for run_id in stale.values_list("pk", flat=True)[:limit]:
        with transaction.atomic():
            run = lock_run(run_id)
            if run.status == RunStatus.CANCELLING:
                _settle(run, actor_ref="")
                settled += 1
    return settled


def _settle(run: Run, *, actor_ref: str) -> None:
    """Under the run's lock: every open call is cancelled (nothing of it ran), the transcript
    gets a result for each, the stream ends with ``cancelled`` then ``finish``."""
    now = timezone.now()
    ended: Frames = []
    for call in ToolCall.objects.filter(
        run=run, status__in=[CallStatus.APPROVED, *CALL_PENDING]
    ).order_by("requested_at", "position"):
        was_pending_approval = call.status == CallStatus.PENDING_APPROVAL
        won = state.transition(
            ToolCall.objects.filter(pk=call.pk),
            call.status,
            CallStatus.CANCELLED,
            decided_by_ref=actor_ref or call.decided_by_ref,
            decided_via="cancel" if was_pending_approval else call.decided_via,
            decided_at=now if was_pending_approval else call.decided_at,
            reason="run cancelled",
            finished_at=now,
        )
        if not won:
            continue
        call.refresh_from_db()
        if was_pending_approval:
            ended.append(frames.approval_settled(call))
            transaction.on_commit(_announce_settled(call))
        ended.append(frames.tool_output_denied(call.pk, "run cancelled"))
    # A delegation's child is cancelled with it (``cancel_children``, after commit).
    delegations = ToolCall.objects.filter(run=run, child_runs__isnull=False)
    for call_id in delegations.filter(status=CallStatus.EXECUTING).values_list("pk", flat=True):
        state.transition(
            ToolCall.objects.filter(pk=call_id),
            CallStatus.EXECUTING,
            CallStatus.CANCELLED,
            reason="run cancelled",
            finished_at=now,
        )
        ended.append(frames.tool_output_denied(call_id, "run cancelled"))
    # A call caught mid-execution may or may not have happened: a person must say (guarantee 5).
    state.transition(ToolCall.objects.filter(run=run), CallStatus.EXECUTING, CallStatus.IN_DOUBT)
    report_unreported_calls(run)
    ended.append(frames.cancelled())
    stream_log.emit(run.pk, ended)
    message = f"cancelled by {actor_ref}" if actor_ref else "cancelled"
    if end_run(run, RunStatus.CANCELLED, code="cancelled", message=message):
        transaction.on_commit(lambda: signals.run_cancelled.send(Run, run=run))


def _announce_settled(call: ToolCall) -> Callable[[], object]:
    return lambda: signals.approval_settled.send(ToolCall, call=call)
