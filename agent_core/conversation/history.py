"""Threads over time (SPEC §16): fork, truncate, regenerate, rename.

None of them repeats an effect. A fork copies the records and results of the calls that ended
(never re-running one) and leaves out a call still open; a truncation and a regenerate keep every
run, call, frame and audit row of what they drop, only marked ``dropped_at`` so the model no
longer reads it (``sql.TRANSCRIPT``). Each is one transaction: a crash leaves all of it or none.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from .. import ids, quotas
from ..actors import Actor
from ..choices import Role, RunStatus
from ..engine import transcript
from ..engine.runs import start_run
from ..exceptions import NotFound, RunActive
from ..models import Message, Run, Thread, ToolCall

FORK_RUNNER = "fork"  # the ``runner`` of the run that holds a fork's copied calls; never driven


@transaction.atomic
def fork(source: Thread, message_id: str, *, actor: Actor) -> Thread:
    """A new thread of ``actor``'s holding ``source``'s messages up to and including
    ``message_id``, with copies of the calls those messages proposed that had ended.

    The copies belong to one run of the new thread, ``completed`` and never driven (a call needs
    a run). A call still open (pending, approved, executing, in doubt) is left out, with its
    part of the message that proposed it; a copied call whose result came after ``message_id``
    gets it in a ``tool`` message at the end, so the model reads every copied call's result.
    """
    point = _message(source, message_id)
    messages = list(
        Message.objects.filter(thread=source, seq__lte=point.seq, dropped_at__isnull=True)
    )
    proposed = list(
        ToolCall.objects.filter(message__in=messages).order_by("requested_at", "position")
    )
    renamed = {call.pk: ids.tool_call_id() for call in proposed if call.is_terminal}
    left_out = {call.pk for call in proposed} - renamed.keys()
    thread = Thread.objects.create(
        owner_ref=actor.ref,
        agent=source.agent,
        title=source.title,
        forked_from_thread_id=source.pk,
        forked_from_message_id=point.pk,
    )
    now = timezone.now()
    run = Run.objects.create(
        thread=thread,
        agent=source.agent,
        status=RunStatus.COMPLETED,
        actor_ref=actor.ref,
        actor_roles=sorted(actor.roles),
        runner=FORK_RUNNER,
        finished_at=now,
    )
    copies: dict[str, Message] = {}
    for message in messages:
        content = [_renamed(part, renamed) for part in message.content if _kept(part, left_out)]
        if content:
            copies[message.pk] = Message(
                thread=thread, run=run, seq=len(copies) + 1, role=message.role, content=content
            )
    Message.objects.bulk_create(copies.values())
    calls = [
        _copy(call, renamed[call.pk], copies[call.message_id], run)
        for call in proposed
        if call.pk in renamed
    ]
    ToolCall.objects.bulk_create(calls)
    answered = {part.get("tool_call_id") for message in copies.values() for part in message.content}
    unanswered = [call for call in calls if call.pk not in answered]
    if unanswered:
        transcript.append_results(run, unanswered)
    return thread


def truncate(thread: Thread, message_id: str) -> int:
    """Drop ``message_id`` and every message after it from what the model reads next; their
    runs are marked dropped too. Refused while a run is active. Answers how many messages."""
    with transaction.atomic():
        _idle(thread)
        return _drop_from(thread, _message(thread, message_id))


def regenerate(thread: Thread, *, actor: Actor, agent: str | None = None) -> Run:
    """Answer the thread's last user message again: the turn it started is dropped (its calls
    keep their effects and are never re-run) and a new run starts from a copy of that message,
    in one transaction. Refused while a run is active."""
    with transaction.atomic():
        _idle(thread)
        asked = (
            Message.objects.filter(thread=thread, role=Role.USER, dropped_at__isnull=True)
            .select_related("run")
            .order_by("-seq")
            .first()
        )
        if asked is None:
            raise NotFound(f"thread {thread.pk} has no message to answer again")
        agent = agent or (asked.run.agent if asked.run is not None else thread.agent)
        _drop_from(thread, asked)
        quotas.check_start(actor, agent, starts_now=True)
        return start_run(agent=agent, message=asked.text, actor=actor, thread_id=thread.pk)


def rename(thread: Thread, title: str) -> Thread:
    """Give the thread a new title."""
    Thread.objects.filter(pk=thread.pk).update(title=title, updated_at=timezone.now())
    thread.refresh_from_db()
    return thread


def _idle(thread: Thread) -> None:
    """Lock the thread; refuse with ``run_active`` while it has an active run."""
    if Thread.objects.select_for_update().get(pk=thread.pk).active_run_id is not None:
        raise RunActive()


def _message(thread: Thread, message_id: str) -> Message:
    found = Message.objects.filter(thread=thread, pk=message_id, dropped_at__isnull=True).first()
    if found is None:
        raise NotFound(f"no message {message_id} in thread {thread.pk}")
    return found


def _drop_from(thread: Thread, point: Message) -> int:
    """Mark ``point`` and the messages after it dropped, and the runs left with none kept."""
    now = timezone.now()
    dropped = Message.objects.filter(
        thread=thread, seq__gte=point.seq, dropped_at__isnull=True
    ).update(dropped_at=now)
    kept = Message.objects.filter(run=OuterRef("pk"), dropped_at__isnull=True)
    Run.objects.filter(thread=thread, dropped_at__isnull=True, messages__dropped_at=now).exclude(
        Exists(kept)
    ).update(dropped_at=now)
    _answer_open_calls(thread)
    return dropped


def _answer_open_calls(thread: Thread) -> None:
    """When the transcript now ends with calls whose results were dropped (a truncation from a
    ``tool`` message), give the model their results again: every call it proposed has one."""
    last = (
        Message.objects.filter(thread=thread, dropped_at__isnull=True)
        .select_related("run")
        .order_by("-seq")
        .first()
    )
    if last is None or last.role != Role.ASSISTANT or last.run is None:
        return
    transcript.append_results(last.run, list(last.tool_calls.order_by("position")))


def _kept(part: dict[str, Any], left_out: set[str]) -> bool:
    """Whether a message part stays in a fork: not one of a call left out."""
    return part.get("id" if part.get("type") == "tool_call" else "tool_call_id") not in left_out


def _renamed(part: dict[str, Any], renamed: dict[str, str]) -> dict[str, Any]:
    """A message part naming the fork's copy of its call."""
    match part.get("type"):
        case "tool_call" if part.get("id") in renamed:
            return {**part, "id": renamed[part["id"]]}
        case "tool_result" if part.get("tool_call_id") in renamed:
            return {**part, "tool_call_id": renamed[part["tool_call_id"]]}
    return part


def _copy(call: ToolCall, new_id: str, message: Message, run: Run) -> ToolCall:
    """A copy of an ended call, with its approval record and outcome, in the fork."""
    fields = {
        field.attname: getattr(call, field.attname)
        for field in ToolCall._meta.concrete_fields
        if field.attname not in {"id", "run_id", "thread_id", "message_id"}
    }
    return ToolCall(**fields, id=new_id, run=run, thread_id=run.thread_id, message=message)
