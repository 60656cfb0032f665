"""The sweeper: the jobs installed apps ask for (``approvals`` expires overdue requests,
``agent_core.extensions``), abandoned cancels settled, runs whose driver died re-driven.

The inline runner calls it from its background thread, the durable runner from Celery beat.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models import Q

from ..choices import RunStatus
from ..engine import clock
from ..engine.cancel import cancel_orphans, settle_abandoned_cancels
from ..engine.dispatch import Runner, get_runner
from ..extensions import sweep_jobs
from ..models import Run

logger = logging.getLogger(__name__)


def stale_runs(limit: int = 100) -> list[str]:
    """Runs that should be moving but whose driver is gone: queued or running, lease expired.

    A run whose row is locked is not one: a session holds it (a worker frozen inside an atomic
    tool, until ``IDLE_IN_TRANSACTION_SECONDS`` ends it), and re-driving it would only park a
    worker slot in front of that lock, sweep after sweep.
    """
    with transaction.atomic():
        return list(
            Run.objects.select_for_update(skip_locked=True)
            .filter(status__in=[RunStatus.QUEUED, RunStatus.RUNNING])
            .filter(Q(lease_expires_at__lt=clock.now()) | Q(lease_expires_at__isnull=True))
            .order_by("lease_expires_at")
            .values_list("pk", flat=True)[:limit]
        )


def sweep(runner: Runner | None = None) -> int:
    """Run the installed apps' sweep jobs, settle abandoned cancels and re-drive stale runs;
    returns how many runs were dispatched."""
    runner = runner or get_runner()
    for job in sweep_jobs():
        done = job()
        if done:
            logger.info("sweep: %s.%s settled %s", job.__module__, job.__qualname__, done)
    cancelled = settle_abandoned_cancels()
    if cancelled:
        logger.info("sweep settled %d cancelled runs whose driver died", cancelled)
    orphans = cancel_orphans()
    if orphans:
        logger.info("sweep cancelled %d child runs whose parent ended", orphans)
    run_ids = stale_runs()
    for run_id in run_ids:
        logger.info("sweep re-drives %s", run_id)
        runner.dispatch(run_id)
    return len(run_ids)
