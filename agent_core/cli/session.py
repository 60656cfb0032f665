"""Who is at the terminal, and starting or continuing a turn on their behalf."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from ..actors import Actor, actor_for_user
from ..conf import agent_settings
from ..conversation import turns
from ..engine.dispatch import get_runner
from ..exceptions import AgentCoreError, QuotaExceeded
from ..models import Run, Thread
from .follow import RunFollower, shown


def refused(exc: AgentCoreError) -> CommandError:
    """A refusal as the command line says it: the code and message every surface shows (the API
    as ``{code, detail}`` with the class's ``status_code``), and its field errors."""
    details = f" {shown(exc.errors)}" if exc.errors else ""
    return CommandError(f"{exc.code}: {exc.message}{details}")


def actor_named(username: str) -> Actor:
    """The actor of the Django user ``username`` (``--as``); a clear error if there is none."""
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise CommandError(f"no user called {username!r} (--as takes a Django username)")
    return actor_for_user(user)


def own_thread(thread_id: str, actor: Actor) -> Thread:
    """The actor's thread ``thread_id``; someone else's thread is reported as unknown."""
    thread = Thread.objects.filter(pk=thread_id, owner_ref=actor.ref).first()
    if thread is None:
        raise CommandError(f"no thread {thread_id} of yours")
    return thread


class QuotaRefused(CommandError):
    """A quota of the actor refused the start (``invoke`` exits with its own code)."""


def start_turn(agent: str, message: str, actor: Actor, thread_id: str | None) -> Run:
    """Start a turn; a refusal (unknown agent, busy thread, quota) becomes a ``CommandError``."""
    try:
        run = turns.start_turn(agent=agent, message=message, actor=actor, thread_id=thread_id)
    except QuotaExceeded as exc:
        raise QuotaRefused(f"{exc.code}: {exc.message} (retry in {exc.retry_after}s)") from exc
    except AgentCoreError as exc:
        raise refused(exc) from exc
    assert isinstance(run, Run), "a turn in mode reject starts now or not at all"
    return run


def finish_driving(run_id: str | None = None) -> None:
    """Before a command returns: let this process's inline runner finish its work.

    With the inline runner, a run the command started or resumed is driven by this process; it is
    followed to its next wait or its end, then the runner is shut down while the interpreter is
    still whole (work left to interpreter exit could not publish its last frames).
    """
    if agent_settings().RUNNER != "inline":
        return
    if run_id is not None:
        RunFollower(run_id).follow(lambda _text: None)
    shutdown = getattr(get_runner(), "shutdown", None)
    if shutdown is not None:
        shutdown(wait=True)
