"""The runners: both drive the same loop over the same rows (SPEC §12).

``get_runner()`` returns this process's runner for ``AGENT["RUNNER"]``; services hand it a run
id after commit with ``dispatch``. ``sweep()`` runs the jobs installed apps ask for (``approvals``
expires overdue requests, ``agent_core.extensions``) and re-drives runs whose driver died; the
inline runner calls it from a background thread, the durable runner from Celery beat.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Protocol

from django.db.models import Q
from django.utils import timezone

from ..conf import agent_settings
from ..extensions import sweep_jobs
from ..models import Run, RunStatus

if TYPE_CHECKING:
    from ..services import Next

logger = logging.getLogger(__name__)


class Runner(Protocol):
    """Something that drives runs: ``dispatch`` is called after the commit that queued one,
    with the kind of its next step when the committing code knows it."""

    def dispatch(self, run_id: str, kind: Next | None = None) -> None: ...


_runner: Runner | None = None
_runner_lock = threading.Lock()


def get_runner() -> Runner:
    """This process's runner, built on first use."""
    global _runner
    with _runner_lock:
        if _runner is None:
            _runner = _build_runner()
        return _runner


def set_runner(runner: Runner | None) -> None:
    """Replace this process's runner (``None``: build a fresh one on next use)."""
    global _runner
    with _runner_lock:
        _runner = runner


def _build_runner() -> Runner:
    if agent_settings().RUNNER == "durable":
        from .durable import DurableRunner

        return DurableRunner()
    from .inline import InlineRunner

    return InlineRunner()


def stale_runs(limit: int = 100) -> list[str]:
    """Runs that should be moving but whose driver is gone: queued or running, lease expired."""
    return list(
        Run.objects.filter(status__in=[RunStatus.QUEUED, RunStatus.RUNNING])
        .filter(Q(lease_expires_at__lt=timezone.now()) | Q(lease_expires_at__isnull=True))
        .order_by("lease_expires_at")
        .values_list("pk", flat=True)[:limit]
    )


def sweep(runner: Runner | None = None) -> int:
    """Run the installed apps' sweep jobs, settle abandoned cancels and re-drive stale runs;
    returns how many runs were dispatched."""
    from .. import services  # services imports the runner package

    runner = runner or get_runner()
    for job in sweep_jobs():
        done = job()
        if done:
            logger.info("sweep: %s.%s settled %s", job.__module__, job.__qualname__, done)
    cancelled = services.settle_abandoned_cancels()
    if cancelled:
        logger.info("sweep settled %d cancelled runs whose driver died", cancelled)
    run_ids = stale_runs()
    for run_id in run_ids:
        logger.info("sweep re-drives %s", run_id)
        runner.dispatch(run_id)
    return len(run_ids)


def start_background() -> None:
    """Process start-up: the inline runner sweeps now and keeps its sweeper thread running."""
    if agent_settings().RUNNER == "inline":
        runner = get_runner()
        start = getattr(runner, "start", None)
        if start is not None:
            start()
