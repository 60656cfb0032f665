"""The approvals app's receivers of signals (the trace of each decision attempt)."""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_save

from .attempts import trace_decision
from .models import DecisionAttempt


def _trace_saved(sender: Any, *, instance: DecisionAttempt, created: bool, **kwargs: Any) -> None:
    if created:
        trace_decision(
            instance.tool_call_id,
            instance.run_id,
            instance.action,
            instance.via,
            instance.outcome,
            instance.actor_ref,
        )


def connect() -> None:
    """Connect the receivers (from ``ApprovalsConfig.ready``)."""
    post_save.connect(
        _trace_saved, sender=DecisionAttempt, weak=False, dispatch_uid="approvals.trace"
    )
