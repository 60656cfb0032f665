"""What a thread is told about an independent proposal's end (SPEC §17): one message, and its
place in the transcript.

A proposal's execution appends its outcome when it ends, whatever turn runs on the thread then.
A model request must never find it between an assistant's tool calls and their results (the
providers refuse that), so ``in_order`` moves it after them; the transcript keeps it where it
landed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..choices import CallStatus
from ..models import ToolCall

# The key a proposal's outcome part carries (besides its text): which call, how it ended.
PROPOSAL_KEY = "proposal"


def outcome_part(call: ToolCall) -> dict[str, Any]:
    """The text part telling the model how the proposal ``call`` ended."""
    args = json.dumps(call.args, ensure_ascii=False, sort_keys=True)
    about = f"Proposal {call.pk} ({call.tool_name} {args})"
    by = f" by {call.decided_by_ref}" if call.decided_by_ref else ""
    match call.status:
        case CallStatus.SUCCEEDED:
            result = json.dumps(call.result, ensure_ascii=False, default=str)
            said = f"was approved{by} and executed. Result: {result}"
        case CallStatus.FAILED:
            said = f"was approved{by}; executing it failed: {call.error}"
        case CallStatus.REJECTED:
            reason = f": {call.reason}" if call.reason else ""
            said = f"was rejected{by}{reason}. It did not run."
        case CallStatus.EXPIRED:
            said = "expired before anyone decided. It did not run."
        case CallStatus.REFUSED:
            said = f"was approved{by} but refused before running: {call.reason}. It did not run."
        case _:
            said = f"ended {call.status}. It did not run."
    return {
        "type": "text",
        "text": f"[{about} {said}]",
        PROPOSAL_KEY: {"proposal_id": call.pk, "status": call.status},
    }


def in_order(messages: Sequence[tuple[str, list[dict[str, Any]]]]) -> list[Any]:
    """``messages`` (role, parts) with each proposal outcome that landed between an assistant's
    tool calls and their results moved right after those results."""
    ordered: list[Any] = []
    held: list[Any] = []
    awaiting = False  # the last assistant message called tools whose results are still to come
    for role, parts in messages:
        if awaiting and any(PROPOSAL_KEY in part for part in parts):
            held.append((role, parts))
            continue
        ordered.append((role, parts))
        if role == "assistant":
            awaiting = any(part.get("type") == "tool_call" for part in parts)
        elif role == "tool":
            awaiting = False
            ordered += held
            held = []
    return ordered + held
