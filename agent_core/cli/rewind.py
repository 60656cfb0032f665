"""The chat's commands over time (SPEC §16): ``/regenerate``, ``/fork <message>``,
``/truncate <message>``; a message is named by its id or its number in the thread (1: the
first)."""

from __future__ import annotations

from django.core.management.base import CommandError

from ..actors import Actor
from ..conversation import history
from ..exceptions import AgentCoreError
from ..models import Message, Run, Thread
from .session import own_thread, refused

COMMANDS = ("/regenerate", "/fork", "/truncate")
USAGE = "/regenerate, /fork <message id or number>, /truncate <message id or number>"


def apply(line: str, actor: Actor, thread_id: str) -> Run | Thread | int:
    """Do what ``line`` says on the actor's thread: the regenerated run to follow, the fork to
    go on in, or how many messages were dropped. A refusal is a ``CommandError``."""
    command, _, named = line.strip().partition(" ")
    thread = own_thread(thread_id, actor)
    try:
        match command, named.strip():
            case "/regenerate", "":
                return history.regenerate(thread, actor=actor)
            case "/fork", message if message:
                return history.fork(thread, _message_id(thread, message), actor=actor)
            case "/truncate", message if message:
                return history.truncate(thread, _message_id(thread, message))
    except AgentCoreError as exc:
        raise refused(exc) from exc
    raise CommandError(f"usage: {USAGE}")


def _message_id(thread: Thread, named: str) -> str:
    """The id of the message ``named``: its id, or its number among those the model reads."""
    if not named.isdigit():
        return named
    kept = Message.objects.filter(thread=thread, dropped_at__isnull=True).order_by("seq")
    ids = list(kept.values_list("pk", flat=True))
    if not 1 <= int(named) <= len(ids):
        raise CommandError(f"thread {thread.pk} has no message number {named}")
    return ids[int(named) - 1]
