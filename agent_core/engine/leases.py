"""Who may write a run: the driver holding its lease, or a writer outside any driver.

A lease's ``token`` grows with every acquisition and fences every write made on a driver's
behalf (``lock``): a worker that lost its lease cannot commit over the one that holds it now.
Writers outside any driver (a decision, a cancel, the sweeper) take the run's row lock
(``lock_run``), so a decision and a driver going to sleep can never miss each other.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..choices import RunStatus
from ..conf import agent_settings
from ..exceptions import LeaseLost
from ..models import Run, Thread
from . import clock, rows, sql, state

# The statuses a lease is taken in (``sql.ACQUIRE_LEASE``): a queued run, or a running one whose
# driver died or passed the lease on.
_TAKEN_FROM = (RunStatus.QUEUED.value, RunStatus.RUNNING.value)


@dataclass(frozen=True)
class Lease:
    """A driver's hold on a run: ``token`` grows with every acquisition and fences every write."""

    run_id: str
    token: int
    owner: str


@dataclass(frozen=True)
class Claim:
    """A driver's request for a run's lease, taken in the transaction that opens its step;
    ``passed``: the token the previous step's driver handed on with the task."""

    run_id: str
    owner: str
    passed: int | None = None


def deadline() -> datetime:
    """When a lease taken or renewed now runs out, on the database's clock."""
    return clock.now() + timedelta(seconds=agent_settings().LEASE_SECONDS)


def renewal_period() -> float:
    """Seconds between a held lease's renewals: a third of the lease, so two may fail before it
    runs out (at least 0.2 s)."""
    return max(agent_settings().LEASE_SECONDS / 3, 0.2)


def acquire(run_id: str, owner: str, *, passed: int | None = None) -> Lease | None:
    """Take the run's lease if nobody holds a live one; ``None`` means another driver has it.

    ``passed``: the token of the lease the previous step's driver passed on with the task (it
    wrote nothing more after enqueueing it); still current, it is taken over at once.
    """
    # One compare-and-set. It waits for the row lock rather than skipping it (a decision holds it
    # only for a moment, and giving up would strand a run that decision just queued), then
    # re-checks its conditions against the row as the lock holder left it. It waits no longer
    # than ``LOCK_TIMEOUT_SECONDS`` (``sessions``): a lock held longer is a stalled holder's, and
    # the claim fails, leaving the run to the sweeper, which skips a locked run (``stale_runs``).
    state.check_statement(sql.ACQUIRE_LEASE, Run, _TAKEN_FROM, RunStatus.RUNNING)
    params = {
        "run_id": run_id,
        "owner": owner,
        "expires_at": deadline(),
        "now": clock.now(),
        "passed": passed,
    }
    row = rows.fetch_row(sql.ACQUIRE_LEASE, params)
    return None if row is None else Lease(run_id, row["lease_token"], owner)


def renew(leases: Iterable[Lease]) -> list[Lease]:
    """Heartbeat: push the deadline of each lease still held; return the ones that were lost."""
    lost = []
    until = deadline()
    for lease in leases:
        renewed = Run.objects.filter(
            pk=lease.run_id, lease_token=lease.token, lease_owner=lease.owner
        ).update(lease_expires_at=until)
        if not renewed:
            lost.append(lease)
    return lost


def hand_off(lease: Lease) -> None:
    """Let go of the lease between steps; the next step's driver may be another worker."""
    Run.objects.filter(pk=lease.run_id, lease_token=lease.token, lease_owner=lease.owner).update(
        lease_owner="", lease_expires_at=deadline()
    )


def lock(lease: Lease, *, allow_cancelling: bool = False) -> Run:
    """The run's row, locked, if ``lease`` still holds it; raises ``LeaseLost`` otherwise.

    A run being cancelled refuses its driver's writes (that is how a driver learns of the cancel
    mid-step) except, with ``allow_cancelling``, the record of a tool that already ran.
    """
    row = rows.fetch_row(sql.LOCK_RUN, fenced(lease))
    return locked(row, allow_cancelling=allow_cancelling)


def fenced(lease: Lease) -> dict[str, Any]:
    """The parameters of a statement that locks the run while ``lease`` holds it
    (``sql.LOCK_RUN``, and those that lock it as it does)."""
    return {"run_id": lease.run_id, "token": lease.token, "owner": lease.owner}


def locked(row: dict[str, Any] | None, *, allow_cancelling: bool = False) -> Run:
    """The run a statement locked under a lease (its ``run`` and ``thread`` as ``sql.LOCK_RUN``
    reads them; ``None``: it matched no row), with ``lock``'s checks."""
    if row is None:
        raise LeaseLost()
    run, thread = rows.from_json(Run, row["run"]), rows.from_json(Thread, row["thread"])
    assert isinstance(run, Run) and isinstance(thread, Thread)
    allowed = {RunStatus.RUNNING, RunStatus.CANCELLING} if allow_cancelling else {RunStatus.RUNNING}
    if run.status not in allowed:
        raise LeaseLost()
    run.thread = thread  # read with it: ``run.thread`` costs no query
    return run


def lock_run(run_id: str) -> Run:
    """The run's row, locked, for a writer outside any driver."""
    return Run.objects.select_for_update().get(pk=run_id)
