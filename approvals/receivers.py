"""The approvals app's receivers of the core's signals (sent after the causing commit)."""

from __future__ import annotations

from typing import Any

from agent_core import signals
from agent_core.models import ToolCall

from .notify import delivery


def _notify_approvers(sender: Any, *, call: ToolCall, **kwargs: Any) -> None:
    # The signal comes after the suspend committed: "after commit" here is right away.
    delivery.notify_after_commit(call)


def connect() -> None:
    """Connect the receivers (from ``ApprovalsConfig.ready``)."""
    signals.approval_requested.connect(
        _notify_approvers, weak=False, dispatch_uid="approvals.notify"
    )
