"""Tell open console pages that a call or run changed (the core's signals fire after commit)."""

from __future__ import annotations

from typing import Any

from agent_core import signals
from agent_core.engine import broadcast
from agent_core.models import Run, ToolCall

from .consumers import CONSOLE_GROUP


def _broadcast(event: str, *, run_id: str, call_id: str = "") -> None:
    # Best effort, queued on the process's broadcast loop: the pages also re-check on their own.
    # Events queued together (a cycle's several commits, other runs' under load) leave as one.
    message = {
        "type": "console.events",
        "events": [{"event": event, "run_id": run_id, "call_id": call_id}],
    }
    broadcast.send(CONSOLE_GROUP, message, merge="events")


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
    for name in ("approval_requested", "approval_settled", "call_in_doubt", "tool_call"):
        getattr(signals, name).connect(
            _call_receiver(name), weak=False, dispatch_uid=f"console.{name}"
        )
    for name in ("run_started", "run_finished", "run_failed", "run_cancelled"):
        getattr(signals, name).connect(
            _run_receiver(name), weak=False, dispatch_uid=f"console.{name}"
        )
