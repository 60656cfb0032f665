"""Deleting old finished threads, with their runs, messages, calls, journal and frames."""

from __future__ import annotations

from datetime import timedelta

from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from ..choices import RUN_ACTIVE
from ..models import Run, Thread


def finished_threads(older_than: timedelta) -> list[str]:
    """Ids of threads idle for ``older_than``: no active run, no run started or ended since."""
    cutoff = timezone.now() - older_than
    recent_or_active = Run.objects.filter(thread=OuterRef("pk")).filter(
        Q(status__in=RUN_ACTIVE) | Q(created_at__gte=cutoff) | Q(finished_at__gte=cutoff)
    )
    return list(
        Thread.objects.filter(created_at__lt=cutoff, active_run__isnull=True)
        .exclude(Exists(recent_or_active))
        .values_list("pk", flat=True)
    )


def delete_finished_threads(older_than: timedelta) -> dict[str, int]:
    """Delete the threads ``finished_threads`` names; returns rows deleted per model label.

    Each thread is locked and re-checked first, so a turn starting on it meanwhile (which claims
    ``active_run`` under the same row lock) keeps it.
    """
    deleted: dict[str, int] = {}
    for thread_id in finished_threads(older_than):
        with transaction.atomic():
            thread = (
                Thread.objects.select_for_update()
                .filter(pk=thread_id, active_run__isnull=True)
                .exclude(runs__status__in=RUN_ACTIVE)
                .first()
            )
            if thread is None:
                continue
            _, counts = thread.delete()
        for label, count in counts.items():
            deleted[label] = deleted.get(label, 0) + count
    return deleted
