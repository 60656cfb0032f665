"""Typed builders for the frames of a run's stream (SPEC §9), one per kind.

A frame is written with the state it announces (``stream_log.emit``); these say what each kind
carries, in one place. Apps add kinds of their own as ``Frame(kind, data)`` (``approvals``:
``approval-progress``, ``approval-escalated``); clients ignore kinds they do not know.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from ..models import ToolCall


class Frame(NamedTuple):
    """One frame before it is numbered: its kind and its JSON data."""

    kind: str
    data: dict[str, Any]


Frames = list[Frame]


def step_start(step: str, attempt: int) -> Frame:
    """A step of the run began: ``step`` names it (``llm:<n>``, ``tool:<id>``); ``attempt`` counts
    from 1."""
    return Frame("step-start", {"step": step, "attempt": attempt})


def step_finish(step: str, usage: dict[str, int]) -> Frame:
    """The step was recorded; ``usage``: the model step's input and output tokens."""
    return Frame("step-finish", {"step": step, "usage": usage})


def text(chunk: str) -> Frame:
    """A piece of the model's answer, in order (replayed text of an attempt a crash cut short
    carries ``superseded: true``)."""
    return Frame("text", {"text": chunk})


def tool_input_available(call: ToolCall) -> Frame:
    """The model proposed a call: its tool, kind and arguments; announced before any approval or
    outcome frame."""
    return Frame(
        "tool-input-available",
        {
            "tool_call_id": call.id,
            "tool_name": call.tool_name,
            "tool_kind": call.kind,
            "input": call.args,
        },
    )


def approval_requested(call: ToolCall) -> Frame:
    """The call waits for a person: who may approve, until when, and the confirmation shown to
    them."""
    return Frame(
        "approval-requested",
        {
            "tool_call_id": call.id,
            "approver": call.approver,
            "expires_at": call.expires_at.isoformat() if call.expires_at else None,
            "confirmation": call.confirmation,
        },
    )


def approval_settled(call: ToolCall) -> Frame:
    """The approval was decided (approved, rejected, expired, cancelled): by whom, how, why."""
    return Frame(
        "approval-settled",
        {
            "tool_call_id": call.id,
            "status": call.status,
            "decided_by": call.decided_by_ref,
            "decided_via": call.decided_via,
            "remember": call.remember,
            "reason": call.reason,
        },
    )


def approval_extended(call_id: str, expires_at: datetime) -> Frame:
    """The pending call's deadline moved to ``expires_at``."""
    return Frame(
        "approval-extended", {"tool_call_id": call_id, "expires_at": expires_at.isoformat()}
    )


def input_requested(call_id: str, schema: dict[str, Any] | None, prompt: str) -> Frame:
    """A human tool asks a person a question: the ``prompt`` and the JSON schema of the answer."""
    return Frame("input-requested", {"tool_call_id": call_id, "schema": schema, "prompt": prompt})


def tool_output(call_id: str, output: Any) -> Frame:
    """The call ran (or was answered); ``output`` is what the model is told."""
    return Frame("tool-output", {"tool_call_id": call_id, "output": output})


def tool_output_error(call_id: str, error: str) -> Frame:
    """The call failed; ``error`` is what the model is told."""
    return Frame("tool-output-error", {"tool_call_id": call_id, "error": error})


def tool_output_denied(call_id: str, reason: str) -> Frame:
    """Nothing ran: rejected, expired (``"approval expired"``), refused or cancelled."""
    return Frame("tool-output-denied", {"tool_call_id": call_id, "reason": reason})


def tool_in_doubt(call_id: str) -> Frame:
    """The attempt died mid-effect: whether it happened is not known until ``recover()`` or a
    person says."""
    return Frame("tool-in-doubt", {"tool_call_id": call_id})


def delegated(call_id: str, child_run_id: str, agent: str) -> Frame:
    """The call started a child run of ``agent`` (SPEC §14)."""
    return Frame(
        "delegated", {"tool_call_id": call_id, "child_run_id": child_run_id, "agent": agent}
    )


def cancelled() -> Frame:
    """The run was cancelled (its ``finish`` follows)."""
    return Frame("cancelled", {})


def finish(status: str, error_code: str = "") -> Frame:
    """The last frame of every run."""
    data: dict[str, Any] = {"status": status}
    if error_code:
        data["error_code"] = error_code
    return Frame("finish", data)


def ends_stream(kind: str, data: dict[str, Any]) -> bool:
    """Whether a frame is the ``finish`` of the stream's own run (a child's, mirrored into its
    ancestors' streams, carries the child's ``run_id``)."""
    return kind == "finish" and "run_id" not in data


def next_turn(message_id: str, next_run_id: str) -> Frame:
    """The thread's next queued message started as ``next_run_id`` when this run ended."""
    return Frame("next-turn", {"message_id": message_id, "next_run_id": next_run_id})


def quota_exceeded(limit: str, detail: str) -> Frame:
    """The run stopped at a quota: ``limit`` names it."""
    return Frame("quota-exceeded", {"limit": limit, "detail": detail})
