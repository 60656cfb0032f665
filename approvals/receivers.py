"""The approvals app's receivers of the core's signals (sent after the causing commit)."""

from __future__ import annotations

import logging
from typing import Any

from agent_core import signals
from agent_core.models import ToolCall

from .notify import delivery

logger = logging.getLogger(__name__)


def _notify_approvers(sender: Any, *, call: ToolCall, **kwargs: Any) -> None:
    # A notification that cannot even be queued must not break the run that sent the signal.
    try:
        delivery.notify(call)
    except Exception:
        logger.exception("could not queue the notifications of %s", call.pk)


def connect() -> None:
    """Connect the receivers (from ``ApprovalsConfig.ready``)."""
    signals.approval_requested.connect(
        _notify_approvers, weak=False, dispatch_uid="approvals.notify"
    )
