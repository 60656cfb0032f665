"""The agent loop: read the journal, take the one next step, record it.

A step has two halves. ``open_step`` plans it from what the database says (never from memory,
``plan.plan``), under the run's lock, and opens it in that same transaction (a model step's
journal entry and request; parking and finishing happen right there); ``claim_step`` also takes
the run's lease in it, as a runner does for the first step it drives. ``take`` then runs the
opened step, makes the record the step hands back (``records.Record``), and says what kind of
step comes next; ``take_and_open`` (chained steps) also opens that next step in the record's
transaction, for a driver that takes step after step itself (the durable runner: only the steps
of its task's queue, ``queues.queue_of``), planned from what the record wrote on top of what the
step was planned from (``journal.after_record``) when that is what a read would return. The
steps themselves are ``model_step.call_model`` (journaled ``llm:<n>``), ``tool_step.execute``
(``tool:<id>``) and ``tool_step.recover`` (a call an earlier attempt left executing).

Every opening answers with an ``Opening``, which the drivers ``match`` on: the step to take, or
what comes next when nothing was opened.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TypeAlias

from django.db import DatabaseError, connection, transaction

from .. import quotas, tracing
from ..agents import Agent, get_agent
from ..choices import RunKind, RunStatus
from ..engine import outages, transcript
from ..engine.cancel import finish_cancel
from ..engine.dispatch import NextStep
from ..engine.journal import Recorded, after_record, begin_model_step, read_run
from ..engine.leases import Claim, Lease, acquire
from ..engine.runs import complete_run, continue_or_park, fail_run, stop_over_quota
from ..exceptions import AgentCoreError, LeaseLost
from ..models import Run, ToolCall
from ..providers.base import ModelRequest
from ..tools import AbortSignal
from . import limits, model_step, proposal_step, tool_step
from .abort import CancelWatch
from .plan import CallModel, Finish, Park, Recover, RunTool, plan
from .queues import queue_of
from .records import Record

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Opened:
    """A model or tool step whose opening transaction committed: what taking it needs."""

    run: Run
    agent: Agent
    step: CallModel | RunTool | Recover
    attempt: int = 0  # model steps: the attempt the opening journaled
    request: ModelRequest | None = None  # model steps: read under the run's lock
    # What the step was planned from: the run's journal and calls under the run's lock.
    journal: dict[str, str] = field(default_factory=dict)
    calls: list[ToolCall] = field(default_factory=list)


@dataclass(frozen=True)
class OtherQueue:
    """The run's next step belongs on ``queue``, not on the driver's (``only``): it was not
    opened, since opening a model step journals an attempt (see ``open_step``)."""

    queue: str


# What opening a run's next step came to, and so what the driver does next: take the step
# (``Opened``); open one still (``NextStep.MODEL`` or ``TOOL``: a step recorded on its own opens
# nothing after it); let the run go (``NextStep.STOP``: it parked, ended, or is no longer this
# lease's); or hand it on to the queue its next step belongs on (``OtherQueue``: only ``only``).
Opening: TypeAlias = Opened | NextStep | OtherQueue


def open_step(lease: Lease, *, only: str | None = None) -> Opening:
    """Plan the run's next step from the database and open it, in one transaction under the
    run's lock: a model step's journal entry and request, a park, the end.

    With ``only`` (a queue), a model or tool step that belongs on another queue is not opened
    (``OtherQueue``), so the durable runner can hand the run on to it. Parking and finishing run
    anywhere.
    """
    try:
        with transaction.atomic():
            return _open(lease, only)
    except Exception as exc:
        return _settle_error(lease, exc)


def claim_step(claim: Claim, *, only: str | None = None) -> tuple[Lease, Opening] | None:
    """``open_step`` that first takes the run's lease, in that same transaction (``None``:
    another driver holds the run)."""
    lease: Lease | None = None
    try:
        with transaction.atomic():
            lease = acquire(claim.run_id, claim.owner, passed=claim.passed)
            if lease is None:
                return None
            return lease, _open(lease, only)
    except Exception as exc:
        # Taking the lease failed, or the database went away: the task fails, and the sweeper
        # re-drives the run.
        if lease is None or outages.database_lost(exc):
            raise
        # The failed transaction took the claim with it: take the lease again to record the
        # failure (a bug or a broken journal must not re-drive the run forever).
        lease = acquire(claim.run_id, claim.owner, passed=claim.passed)
        if lease is None:
            raise
        return lease, _settle_error(lease, exc)


def _open(lease: Lease, only: str | None) -> Opening:
    """Read the run, its journal and calls under its lock, and open its next step."""
    found = read_run(lease.run_id, lease=lease)
    if found is None:  # another driver holds the run now
        return NextStep.STOP
    return _open_from(lease, only, *found)


def _open_from(
    lease: Lease, only: str | None, run: Run, journal: dict[str, str], every_call: list[ToolCall]
) -> Opening:
    """Open the run's next step, planned from ``run``, its ``journal`` and ``every_call`` as a
    read under its lock returns them (``_open``, or ``_open_after`` without reading)."""
    if run.status == RunStatus.CANCELLING:  # the safe point between steps
        finish_cancel(lease)
        return NextStep.STOP
    if run.status != RunStatus.RUNNING:
        return NextStep.STOP
    agent = get_agent(run.agent)
    step = plan(journal, every_call)
    if run.kind == RunKind.PROPOSAL:
        checked = proposal_step.next_step(lease, run, agent, step)
        if isinstance(checked, proposal_step.Concluded):
            return NextStep.STOP
        step = checked
    note = limits.check(agent, step, every_call)  # raises past a limit of the run
    if only is not None and isinstance(step, CallModel | RunTool | Recover):
        queue = queue_of(agent, None if isinstance(step, CallModel) else step.call.tool_name)
        if queue != only:
            return OtherQueue(queue)
    # After a record that committed by itself (``records.OneStatement``): its approved call
    # comes next.
    assert connection.in_atomic_block or isinstance(step, RunTool | Recover), step
    # What an opening writes comes last: one statement, or several in a savepoint (an opening
    # joined to a record must never commit half, see ``_chain``).
    match step:
        case CallModel(index, previous):
            if (over := quotas.check_step(run)) is not None:  # the safe point before the call
                with transaction.atomic():
                    stop_over_quota(run, limit=over.limit, detail=over.detail)
                return NextStep.STOP
            name = f"llm:{index}"
            first = name not in journal  # else a retried attempt
            results = limits.told(transcript.results(list(previous)), note) if first else []
            attempt, request = begin_model_step(run, agent, name, results=results, first=first)
            return Opened(run, agent, step, attempt, request, journal, every_call)
        case RunTool() | Recover():
            return Opened(run, agent, step, journal=journal, calls=every_call)
        case Park():
            return continue_or_park(run)
        case Finish():
            with transaction.atomic():
                complete_run(run)
            return NextStep.STOP


@tracing.step
def take(lease: Lease, opened: Opened, *, abort: AbortSignal | None = None) -> NextStep:
    """Take an opened step: call the model or run the tool, and record what came of it in a
    transaction of its own. Returns what kind of step comes next."""
    try:
        record = _run(lease, opened, abort)
        if isinstance(record, NextStep):  # made already
            return record
        try:
            return _next(record.make())
        except tool_step.AtomicToolRaised as raised:  # rolled back: record the failure
            return _next(raised.record.make())
    except Exception as exc:
        return _step_failed(lease, exc)


@tracing.step
def take_and_open(lease: Lease, opened: Opened, *, only: str | None = None) -> Opening:
    """Chained steps: ``take``, then open the step after it in the transaction that records this
    one (``_chain``), for a driver that takes step after step itself (both runners): one commit
    fewer per step.

    The record of a tool with an effect outside this database still commits on its own.
    ``only``: as for ``open_step``.
    """
    try:
        record = _run(lease, opened, None)
        if isinstance(record, NextStep):  # made already: nothing is opened
            return record
        try:
            return _chain(lease, only, opened, record)
        except tool_step.AtomicToolRaised as raised:  # rolled back: record the failure
            return _chain(lease, only, opened, raised.record)
    except Exception as exc:
        return _step_failed(lease, exc)


def _run(lease: Lease, opened: Opened, abort: AbortSignal | None) -> NextStep | Record:
    """Call the model or run the tool: the step's record, still to be made, or what comes next
    when the step made it itself (a tool with an effect outside this database, a recovery)."""
    run, agent = opened.run, opened.agent
    abort = abort or CancelWatch(run.pk, fresh=True)  # just read: running, not cancelling
    match opened.step:
        case CallModel(index):
            assert opened.request is not None
            return model_step.call_model(
                lease, run, agent, index, opened.attempt, opened.request, abort
            )
        case RunTool(call):
            return tool_step.execute(lease, run, agent, call, abort)
        case Recover(call):
            return tool_step.recover(lease, run, agent, call)


def _chain(lease: Lease, only: str | None, opened: Opened, record: Record) -> Opening:
    """Make ``opened``'s ``record`` and open the step after it in the same transaction
    (``Record.shared``).

    The opening is all or nothing, and never takes the record with it: it writes last, in one
    statement or in a savepoint of its own (``_open``), so an error it raises before that (a
    journal that diverged, the step budget spent) leaves the record to commit, and the run
    fails after it. No savepoint is taken for the rest: a database error breaks the whole
    transaction, and then neither commits (the run fails, as for an error in the record).
    """
    with record.shared():
        after = record.make()
        if _next(after) == NextStep.STOP:
            return NextStep.STOP
        try:
            return _open_after(lease, only, opened, after)
        except DatabaseError:
            raise
        except Exception as exc:
            failed = exc
    return _settle_error(lease, failed)


def _open_after(
    lease: Lease, only: str | None, opened: Opened, after: NextStep | Recorded
) -> Opening:
    """Open the step after ``opened``, in the transaction of its record: planned from what the
    record wrote when it says all a read would (``journal.after_record``), else read."""
    if isinstance(after, Recorded) and (
        merged := after_record(opened.journal, opened.calls, after)
    ):
        return _open_from(lease, only, after.run, *merged)
    return _open(lease, only)


def _next(after: NextStep | Recorded) -> NextStep:
    return after.next if isinstance(after, Recorded) else after


def _step_failed(lease: Lease, exc: Exception) -> NextStep:
    """A step raised while it ran or was recorded."""
    if isinstance(exc, model_step.RetryLater):  # the driver retries it
        raise exc
    if isinstance(exc, LeaseLost):
        # A cancel refuses the driver's writes: this is how a step in flight learns of it.
        if finish_cancel(lease):
            return NextStep.STOP
        raise exc
    return _settle_error(lease, exc)


def _settle_error(lease: Lease, exc: Exception) -> NextStep:
    """A step raised: a run being cancelled settles as cancelled (an aborted model call is a
    cancel, not a failure); any other run fails with the error's code.

    A lost database is not the step's error (``outages``): it is raised again, the run keeps its
    lease until that runs out, and the sweeper re-drives it (a call left executing is
    recovered)."""
    if outages.database_lost(exc):
        raise exc
    if finish_cancel(lease):
        return NextStep.STOP
    if isinstance(exc, AgentCoreError):
        code, message = exc.code, exc.message
    else:
        logger.exception("run %s failed in the loop", lease.run_id, exc_info=exc)
        code, message = "run_failed", repr(exc)
    fail_run(lease.run_id, code=code, message=message, lease=lease)
    return NextStep.STOP
