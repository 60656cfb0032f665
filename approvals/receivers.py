"""The approvals app's receivers of the core's signals (sent after the causing commit)."""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_save

from agent_core import signals
from agent_core.models import ToolCall

from .attempts import trace_decision
from .models import DecisionAttempt
from .notify import delivery


def _notify_approvers(sender: Any, *, call: ToolCall, **kwargs: Any) -> None:
    # The signal comes after the suspend committed: "after commit" here is right away.
    delivery.notify_after_commit(call)


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
    signals.approval_requested.connect(
        _notify_approvers, weak=False, dispatch_uid="approvals.notify"
    )
    post_save.connect(
        _trace_saved, sender=DecisionAttempt, weak=False, dispatch_uid="approvals.trace"
    )
