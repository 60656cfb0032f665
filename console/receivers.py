"""Tell open console pages that a call or run changed (the core's signals fire after commit)."""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from agent_core import signals
from agent_core.models import Run, ToolCall

from .consumers import CONSOLE_GROUP

logger = logging.getLogger(__name__)


def _broadcast(event: str, *, run_id: str, call_id: str = "") -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    message = {
        "type": "console.event",
        "event": {"event": event, "run_id": run_id, "call_id": call_id},
    }
    try:
        async_to_sync(layer.group_send)(CONSOLE_GROUP, message)
    except Exception:
        # Live updates are best effort: the pages also re-check on their own.
        logger.warning("could not broadcast %s of %s", event, run_id, exc_info=True)


def _call_receiver(name: str) -> Any:
    def receiver(sender: Any, *, call: ToolCall, **kwargs: Any) -> None:
        _broadcast(name, run_id=call.run_id, call_id=call.pk)

    return receiver


def _run_receiver(name: str) -> Any:
    def receiver(sender: Any, *, run: Run, **kwargs: Any) -> None:
        _broadcast(name, run_id=run.pk)

    return receiver


def connect() -> None:
    """Connect the receivers (from ``ConsoleConfig.ready``)."""
    for name in ("approval_requested", "approval_settled", "tool_call"):
        getattr(signals, name).connect(
            _call_receiver(name), weak=False, dispatch_uid=f"console.{name}"
        )
    for name in ("run_started", "run_finished", "run_failed", "run_cancelled"):
        getattr(signals, name).connect(
            _run_receiver(name), weak=False, dispatch_uid=f"console.{name}"
        )
