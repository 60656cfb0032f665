"""Following a run from the database: its new frames, until it parks on a person or ends.

A command runs in its own process, possibly not the one driving the run, so it reads the run's
``StreamFrame`` rows (committed in ``seq`` order) rather than the live channel layer.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..choices import CALL_PENDING, RUN_ACTIVE, RUN_TERMINAL, RunStatus
from ..models import Run, StreamFrame, ToolCall

POLL_SECONDS = 0.1
_SHOWN_CHARS = 300


@dataclass
class RunFollower:
    """Reads a run's frames after ``after`` and reports when the run stops moving."""

    run_id: str
    after: int = 0

    def new_frames(self) -> list[StreamFrame]:
        rows = list(
            StreamFrame.objects.filter(run_id=self.run_id, seq__gt=self.after, superseded=False)
            .order_by("seq")
            .only("seq", "kind", "data")
        )
        if rows:
            self.after = rows[-1].seq
        return rows

    def follow(self, write: Callable[[str], None], *, poll: float = POLL_SECONDS) -> Run:
        """Write each new frame as it commits; return the run once it waits or has ended."""
        while True:
            run = Run.objects.get(pk=self.run_id)
            # The status and the frames announcing it commit together: read the frames after the
            # status, and nothing that led to it can be missing.
            for frame in self.new_frames():
                if text := render(frame.kind, frame.data):
                    write(text)
            if run.status in RUN_TERMINAL:
                return run
            if run.status == RunStatus.WAITING and parked(run):
                return run
            time.sleep(poll)


def parked(run: Run) -> bool:
    """Whether a run read as waiting waits on a person: a run waiting on its child runs alone is
    still moving (SPEC §14). The children are read after the run, in another snapshot: a child
    that ended in between re-queued the run and wrote to its stream in the same transaction, so
    the run is read again and must not have moved."""
    if not (pending_calls(run.pk) or len(awaited_runs(run.pk)) == 1):
        return False
    return Run.objects.filter(pk=run.pk, status=run.status, last_seq=run.last_seq).exists()


def awaited_runs(run_id: str) -> list[str]:
    """The run and the active child runs it waits on, theirs too (its delegations' runs)."""
    found, level = [run_id], [run_id]
    while level:
        level = list(
            Run.objects.filter(
                parent_run_id__in=level, parent_tool_call__isnull=False, status__in=RUN_ACTIVE
            ).values_list("pk", flat=True)
        )
        found += level
    return found


def pending_calls(run_id: str) -> list[ToolCall]:
    """The calls waiting on a person (an approval or an answer) of the run and of the child
    runs it waits on, in the order they were proposed."""
    return list(
        ToolCall.objects.filter(run_id__in=awaited_runs(run_id), status__in=CALL_PENDING)
        .select_related("run")
        .order_by("requested_at", "position")
    )


def wait_until_settled(call_id: str, *, poll: float = POLL_SECONDS) -> ToolCall:
    """Block until someone (anywhere) decides the call, or its run ends."""
    while True:
        call = ToolCall.objects.select_related("run").get(pk=call_id)
        if call.status not in CALL_PENDING or call.run.is_terminal:
            return call
        time.sleep(poll)


def shown(value: Any) -> str:
    """A JSON value on one line, cut short for a terminal."""
    text = value if isinstance(value, str) else json.dumps(value, default=str, sort_keys=True)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 1] + "…"


def render(kind: str, data: dict[str, Any]) -> str:
    """A frame as terminal text (empty for frames a terminal does not need); a child run's
    frames (SPEC §14) are indented under the call that started it."""
    if "run_id" in data:
        if kind in ("finish", "text"):  # its answer comes back as the delegation's output
            return ""
        own = {k: v for k, v in data.items() if k not in ("run_id", "parent_tool_call_id")}
        return "".join(f"    | {line}\n" for line in render(kind, own).splitlines() if line)
    match kind:
        case "delegated":
            return f"  => {data['agent']} ({data['child_run_id']})\n"
        case "text":
            return str(data.get("text", ""))
        case "tool-input-available":
            return f"\n  -> {data['tool_name']} {shown(data.get('input', {}))}\n"
        case "approval-settled":
            who = f" by {data['decided_by']}" if data.get("decided_by") else ""
            via = f" via {data['decided_via']}" if data.get("decided_via") else ""
            reason = f": {data['reason']}" if data.get("reason") else ""
            return f"  {data['status']}{who}{via}{reason}\n"
        case "tool-output":
            return f"  <- {shown(data.get('output'))}\n"
        case "tool-output-error":
            return f"  <- error: {shown(data.get('error'))}\n"
        case "tool-output-denied":
            return f"  <- did not run: {data.get('reason', '')}\n"
        case "tool-in-doubt":
            return f"  ?? {data['tool_call_id']} may or may not have run\n"
        case "cancelled":
            return "\n[cancelled]\n"
        case "finish" if data.get("status") != RunStatus.COMPLETED:
            code = f" ({data['error_code']})" if data.get("error_code") else ""
            return f"\n[run {data.get('status')}{code}]\n"
        case "finish":
            return "\n"
    return ""
