"""``agent invoke``: one turn, no questions asked; a run that waits on a person exits 3."""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum

from ..actors import Actor
from ..choices import Role, RunStatus
from ..models import Message
from .follow import RunFollower, pending_calls, shown
from .session import QuotaRefused, finish_driving, own_thread, start_turn


class ExitCode(IntEnum):
    """What ``agent invoke`` exits with."""

    COMPLETED = 0
    FAILED = 1  # the run failed or was cancelled; the error goes to stderr
    WAITING = 3  # the run waits on a person; the pending calls go to stdout
    QUOTA_EXCEEDED = 4  # a quota refused the start or stopped the run; the reason goes to stderr


def invoke(
    agent: str,
    message: str,
    *,
    actor: Actor,
    thread_id: str | None,
    out: Callable[[str], None],
    err: Callable[[str], None],
) -> ExitCode:
    """Run one turn to its end or its first wait; print the answer or the pending calls."""
    if thread_id is not None:
        own_thread(thread_id, actor)
    try:
        run = start_turn(agent, message, actor, thread_id)
    except QuotaRefused as exc:
        err(str(exc))
        return ExitCode.QUOTA_EXCEEDED
    run = RunFollower(run.pk).follow(lambda _text: None)
    finish_driving()
    if run.status == RunStatus.COMPLETED:
        answer = Message.objects.filter(run=run, role=Role.ASSISTANT).order_by("-seq").first()
        out(answer.text if answer is not None else "")
        return ExitCode.COMPLETED
    if run.status == RunStatus.WAITING:
        calls = pending_calls(run.pk)
        out(f"waiting on a person: thread {run.thread_id} run {run.pk}")
        for call in calls:
            who = "answer" if call.status == "pending_input" else f"approver={call.approver}"
            out(f"{call.pk}\t{call.tool_name}\t{shown(call.args)}\t{who}")
        if not calls:
            out(f"blocked: {run.error_code or 'a person must resolve a call'}")
        return ExitCode.WAITING
    err(f"run {run.pk} {run.status}: {run.error_code} {run.error_message}".rstrip())
    return ExitCode.QUOTA_EXCEEDED if run.error_code == "quota_exceeded" else ExitCode.FAILED
