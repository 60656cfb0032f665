"""A decision attempt: authorized, made under the run's lock, audited whatever came of it.

``with attempt(call_id, action, actor, via) as current:`` refuses a reserved ``via``, takes the
core's ``decision`` (a transaction holding the run's lock, the call read under it), answers 404
for a call the actor may not see, and runs the body. Every attempt leaves a ``DecisionAttempt``
row (a decision that settles the call appends it in its compare-and-set's statement,
``Attempt.audited_by``); a refusal (an ``AgentCoreError`` from the body) is raised after that row
has committed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from django.utils import timezone

from agent_core import rows, tracing
from agent_core.actors import SYSTEM, Actor
from agent_core.choices import CallStatus
from agent_core.decisions import Decision, decision
from agent_core.exceptions import AgentCoreError, AlreadyDecided, NotFound, RunNotActive
from agent_core.models import Run, ToolCall
from agent_core.streams import Riding

from . import evidence, guards, sql
from .exceptions import ApprovalExpired
from .models import Action
from .quorum import Standing


class Outcome(StrEnum):
    """A successful decision either changed the call or repeated what was already decided."""

    APPLIED = "applied"
    UNCHANGED = "unchanged"


@dataclass
class Attempt:
    """The decision an attempt holds, what came of it and the note its audit row keeps; once the
    attempt is over, its call is the row as the decision left it."""

    decision: Decision
    action: Action
    actor: Actor
    via: str
    outcome: Outcome | None = None
    note: str = ""
    # The call's quorum standing when the attempt counted a vote (None: it did not).
    standing: Standing | None = None
    # Whether the audit row rode on the settling statement (``audited_by``).
    audited: bool = False
    # What the decider was shown of the call before the attempt (``evidence.CallCard``), and,
    # for an approval, the digest of the args it approves (edited ones included).
    card_digest: str = ""
    args_digest: str = ""

    @property
    def done(self) -> Outcome:
        """The outcome of an attempt whose body ran to its end."""
        assert self.outcome is not None, "the body of an attempt sets its outcome"
        return self.outcome

    def audited_by(self, outcome: Outcome) -> Riding:
        """The settling statement with this attempt's audit row riding on it (one round trip):
        the attempt ends with ``outcome``, and ``attempt`` appends no row of its own."""
        self.outcome, self.audited = outcome, True
        return Riding(sql.SETTLE_AUDITED, self.entry(None, self.note).params())

    def entry(self, refusal: AgentCoreError | None, detail: str) -> Entry:
        """This attempt's audit row as it stands, refused by ``refusal`` if not ``None``."""
        call, outcome = self.decision.call, self.outcome
        return Entry(
            call.pk,
            call,
            self.action,
            self.actor,
            self.via,
            outcome,
            refusal,
            detail,
            self.card_digest,
            self.args_digest,
        )


@dataclass(frozen=True)
class Entry:
    """What an attempt's ``DecisionAttempt`` row records: the call (``None`` when no call has
    that id) and who tried what through which channel, with what came of it."""

    tool_call_id: str
    call: ToolCall | None
    action: Action
    actor: Actor
    via: str
    outcome: Outcome | None = None
    refusal: AgentCoreError | None = None
    detail: str = ""
    card_digest: str = ""
    args_digest: str = ""

    @property
    def run_id(self) -> str:
        return self.call.run_id if self.call else ""

    @property
    def code(self) -> str:
        """The row's ``outcome``: what came of it, or the refusal's error code."""
        return self.outcome.value if self.outcome else self.refusal.code if self.refusal else ""

    def trace(self) -> None:
        trace_decision(
            self.tool_call_id, self.run_id, self.action, self.via, self.code, self.actor.ref
        )

    def params(self) -> list[Any]:
        """The parameters of ``sql.AUDIT_ATTEMPT``."""
        call = self.call
        thread_id, tool_name = (call.thread_id, call.tool_name) if call else ("", "")
        return [
            self.tool_call_id,
            self.run_id,
            thread_id,
            tool_name,
            self.action,
            self.actor.ref,
            self.via,
            self.code,
            self.detail,
            timezone.now(),
            self.card_digest,
            evidence.policy_digest(),
            self.args_digest,
        ]


@contextmanager
def attempt(tool_call_id: str, action: Action, actor: Actor, via: str) -> Iterator[Attempt]:
    """Hold the call's decision for the body, and audit the attempt whatever came of it."""
    guards.check_via(via)
    refusal: AgentCoreError | None = None
    with decision(tool_call_id, sql.LOCK_CALL_WITH_QUORUM) as found:
        if found is None or not guards.may_see(actor, found.call):
            # Unseen is unknown (SPEC §7): a 403 would confirm that the id exists.
            refusal = NotFound(f"no tool call {tool_call_id}")
            call = found.call if found else None
            audit(Entry(tool_call_id, call, action, actor, via, None, refusal, refusal.message))
        else:
            current = Attempt(found, action, actor, via)
            current.card_digest = evidence.CallCard.of(found.call, found.joined[0] or 1).digest
            try:
                yield current
            except AgentCoreError as exc:
                refusal = exc
            entry = current.entry(refusal, refusal.message if refusal else current.note)
            if current.audited and refusal is None:
                entry.trace()  # its row rode on the settling statement
            else:
                audit(entry)
    if refusal is not None:
        raise refusal


def conflict(run: Run, call: ToolCall) -> AgentCoreError:
    """The refusal of a decision on a call that no longer waits for one."""
    if call.status == CallStatus.EXPIRED:
        return ApprovalExpired()
    if call.status == CallStatus.CANCELLED or (run.is_terminal and call.decided_at is None):
        return RunNotActive()
    return AlreadyDecided(f"{call.pk} is already {call.status}")


def check_deadline(held: Decision) -> None:
    """Guarantee 9 at decision time: a request past its deadline expires now and answers 410."""
    call = held.call
    if call.expires_at is not None and call.expires_at <= timezone.now():
        expire(held)
        raise ApprovalExpired()


def expire(held: Decision) -> bool:
    """``pending_approval → expired``, decided by the system (``decided_via="expiry"``) and
    audited as its attempt; ``False`` when the call was no longer pending."""
    if not held.settle(CallStatus.EXPIRED, decided_by_ref=SYSTEM.ref, decided_via="expiry"):
        return False
    call = held.call
    audit(Entry(call.pk, call, Action.EXPIRE, SYSTEM, "expiry", Outcome.APPLIED))
    return True


def audit(entry: Entry) -> None:
    """Append an attempt's ``DecisionAttempt`` row: one named statement and no model built, so
    it is traced here (an attempt saved through the model is traced by ``post_save``)."""
    rows.execute(sql.AUDIT_ATTEMPT, entry.params())
    entry.trace()


def trace_decision(
    tool_call_id: str, run_id: str, action: str, via: str, outcome: str, actor_ref: str
) -> None:
    """Trace a decision attempt (every one, refused ones too, is audited as one row)."""
    if run_id:
        tracing.event(
            "airlock.decision",
            run_id,
            **{
                "airlock.tool_call_id": tool_call_id,
                "airlock.decision.action": action,
                "airlock.decision.via": via,
                "airlock.decision.outcome": outcome,
                "enduser.id": actor_ref,
            },
        )
