"""Text decisions (SPEC §17): a chat message that is, as a whole, a decision word decides the
thread's pending call, through the port, with no model call.

A message decides only when all of it is one of ``APPROVALS["TEXT_DECISIONS"]``'s words (any
language's, case and surrounding blanks aside, one closing ``.`` or ``!`` allowed), optionally
followed by ``#<tool call id>`` or ``#<its short form>`` (``short_id``). Anything else — a
question, quoted text, a longer sentence — is an ordinary message for the model. With several
calls pending and no id, the answer lists them and nothing is decided.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from agent_core.actors import Actor
from agent_core.choices import CallStatus
from agent_core.gate import TextReply
from agent_core.models import Thread, ToolCall

from . import services as port
from .conf import approvals_settings, per_settings
from .policy import get_policy

VIA = "text"
SHORT = 6  # characters of a call id's random end that name it in a chat

# A decision and nothing else: the words, then at most one ``#id``, then one closing mark.
_MESSAGE = re.compile(r"^(?P<words>[^\W\d_]+(?: [^\W\d_]+)?)(?: #(?P<ref>[A-Za-z0-9_]+))?[.!]?$")


class Verb(StrEnum):
    APPROVE = "approve"
    ALWAYS = "always"  # approve, and remember for the thread
    REJECT = "reject"


@dataclass(frozen=True)
class Parsed:
    """What a message decides: the verb, and the call it names ("" none)."""

    verb: Verb
    ref: str = ""


def short_id(call_id: str) -> str:
    """The short form of a call id a person can type: its last characters, lower case."""
    return call_id[-SHORT:].lower()


@per_settings
def words() -> dict[str, Verb]:
    """Every configured word (lower case, single-spaced) and what it decides; raises
    ``ValueError`` when ``TEXT_DECISIONS`` is not ``{language: {verb: [words]}}``."""
    found: dict[str, Verb] = {}
    for language, lists in approvals_settings().TEXT_DECISIONS.items():
        if not isinstance(lists, dict) or not set(lists) <= set(Verb):
            raise ValueError(f"TEXT_DECISIONS[{language!r}] maps {sorted(Verb)} to word lists")
        for verb, listed in lists.items():
            if not isinstance(listed, list | tuple) or not all(isinstance(w, str) for w in listed):
                raise ValueError(f"TEXT_DECISIONS[{language!r}][{verb!r}] must be a list of words")
            for word in listed:
                found[" ".join(word.lower().split())] = Verb(verb)
    return found


def parse(text: str) -> Parsed | None:
    """The decision ``text`` makes as a whole, or ``None``: it is a message for the model."""
    match = _MESSAGE.match(" ".join(text.split()).lower())
    if match is None:
        return None
    verb = words().get(match["words"])
    return None if verb is None else Parsed(verb, match["ref"] or "")


def decide(actor: Actor, thread: Thread, text: str) -> TextReply | None:
    """Decide the thread's pending call ``text`` names, as ``actor``; ``None`` when the text is
    no decision, or nothing the actor may decide waits (the message goes to the model)."""
    parsed = parse(text)
    if parsed is None:
        return None
    policy = get_policy()
    pending = [
        call
        for call in ToolCall.objects.filter(thread=thread, status=CallStatus.PENDING_APPROVAL)
        .select_related("run")
        .order_by("requested_at", "position")
        if policy.can_decide(actor, call)
    ]
    if not pending:
        return None
    if parsed.ref:
        named = [c for c in pending if parsed.ref in (c.pk.lower(), short_id(c.pk))]
        if len(named) != 1:
            return TextReply(f"No pending call #{parsed.ref} waits for you. {_listed(pending)}")
        (call,) = named
    elif len(pending) > 1:
        return TextReply(f"Several calls wait for you; say which. {_listed(pending)}")
    else:
        (call,) = pending
    if parsed.verb == Verb.REJECT:
        outcome = port.reject(call.pk, actor=actor, reason="rejected in the chat", via=VIA)
    else:
        remember = parsed.verb == Verb.ALWAYS
        outcome = port.approve(call.pk, actor=actor, remember=remember, via=VIA)
    call.refresh_from_db(fields=["status"])
    said = f"{call.tool_name} #{short_id(call.pk)}: {call.status}"
    return TextReply(
        said, tool_call_id=call.pk, status=call.status, outcome=outcome.result, run_id=call.run_id
    )


def _listed(calls: list[ToolCall]) -> str:
    return "Pending: " + "; ".join(
        f"#{short_id(c.pk)} {c.summary or c.tool_name} ({c.pk})" for c in calls
    )
