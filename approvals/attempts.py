"""A decision attempt: authorized, made under the run's lock, audited whatever came of it.

``attempt(call_id, action, actor, via, decide)`` refuses a reserved ``via``, takes the core's
``decision`` (a transaction holding the run's lock, the call read under it), answers 404 for a
call the actor may not see, and runs ``decide``, which returns what came of it. Every attempt
leaves a ``DecisionAttempt`` row, written by ``audit`` (the one writer, which traces it) or, when
a decision settles the call, in its compare-and-set's statement (``Attempt.audited_by``); a
refusal (an ``AgentCoreError`` from ``decide``) is raised after that row has committed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from django.utils import timezone

from agent_core import tracing
from agent_core.actors import SYSTEM, Actor
from agent_core.choices import CallStatus
from agent_core.engine import clock, rows, state
from agent_core.engine.decisions import Decision, Settling, decision
from agent_core.exceptions import AgentCoreError, AlreadyDecided, NotFound, RunNotActive
from agent_core.models import Run, ToolCall

from . import evidence, guards, sql
from .exceptions import ApprovalExpired
from .models import Action
from .quorum import Standing


class Result(StrEnum):
    """A successful decision either changed the call or repeated what was already decided."""

    APPLIED = "applied"
    UNCHANGED = "unchanged"


@dataclass(frozen=True)
class Outcome:
    """What a decision did (``result``), with the call as it left it and, when it counted a
    vote, the call's quorum standing (what the API answers, without reading the call again)."""

    result: Result
    call: ToolCall
    standing: Standing | None = None


@dataclass
class Attempt:
    """The decision an attempt holds and the note its audit row keeps; the body (``decide``)
    says what came of it by returning it."""

    decision: Decision
    action: Action
    actor: Actor
    via: str
    note: str = ""
    # The call's quorum standing when the attempt counted a vote (None: it did not).
    standing: Standing | None = None
    # Whether the audit row rode on the settling statement (``audited_by``).
    audited: bool = False
    # What the decider was shown of the call before the attempt (``evidence.CallCard``), and,
    # for an approval, the digest of the args it approves (edited ones included).
    card_digest: str = ""
    args_digest: str = ""

    def audited_by(self, status: CallStatus) -> Settling:
        """The statement settling the call as ``status`` with this attempt's audit row riding on
        it (one round trip): the attempt is applied, and ``attempt`` appends no row of its own.
        The settlement names the call, its run and the time the row keeps."""
        state.check_statement(sql.SETTLE_AUDITED, ToolCall, CallStatus.PENDING_APPROVAL, status)
        self.audited = True
        params = self.entry(Result.APPLIED).params()
        for settled in ("tool_call_id", "run_id", "created_at"):
            del params[settled]
        return Settling(sql.SETTLE_AUDITED, params)

    def entry(self, outcome: str) -> Entry:
        """This attempt's audit row, ending in ``outcome`` (a result or a refusal's code), with
        its note and its evidence."""
        entry = Entry.of(self.decision.call, self.action, self.actor, self.via, outcome)
        return replace(
            entry.noted(self.note), card_digest=self.card_digest, args_digest=self.args_digest
        )


@dataclass(frozen=True)
class Entry:
    """One ``DecisionAttempt`` row: who tried what on which call through which channel, and what
    came of it (``outcome``: the result, or the refusal's error code)."""

    tool_call_id: str
    action: str
    actor_ref: str
    via: str
    outcome: str
    detail: str = ""
    run_id: str = ""
    thread_id: str = ""
    tool_name: str = ""
    card_digest: str = ""
    args_digest: str = ""

    @classmethod
    def of(cls, call: ToolCall, action: str, actor: Actor, via: str, outcome: str) -> Entry:
        """The row of an attempt on ``call``."""
        return cls(
            call.pk,
            action,
            actor.ref,
            via,
            outcome,
            run_id=call.run_id,
            thread_id=call.thread_id,
            tool_name=call.tool_name,
        )

    @classmethod
    def refused(
        cls,
        tool_call_id: str,
        call: ToolCall | None,
        action: str,
        actor: Actor,
        via: str,
        refusal: AgentCoreError,
    ) -> Entry:
        """The row of a refused attempt on ``tool_call_id`` (``call``: the call if one has that
        id), its refusal's message as the detail."""
        entry = (
            cls.of(call, action, actor, via, refusal.code)
            if call is not None
            else cls(tool_call_id, action, actor.ref, via, refusal.code)
        )
        return entry.noted(refusal.message)

    def noted(self, detail: str) -> Entry:
        return replace(self, detail=detail)

    def params(self) -> dict[str, Any]:
        """The named parameters of ``sql.AUDIT_ATTEMPT``."""
        return {
            "tool_call_id": self.tool_call_id,
            "run_id": self.run_id,
            "thread_id": self.thread_id,
            "tool_name": self.tool_name,
            "action": self.action,
            "actor_ref": self.actor_ref,
            "via": self.via,
            "outcome": self.outcome,
            "detail": self.detail,
            "created_at": timezone.now(),
            "card_digest": self.card_digest,
            "policy_digest": evidence.policy_digest(),
            "args_digest": self.args_digest,
        }

    def trace(self) -> None:
        """Trace the attempt (SPEC §13), as ``audit`` does with every row it writes."""
        if self.run_id:
            tracing.event(
                "airlock.decision",
                self.run_id,
                **{
                    "airlock.tool_call_id": self.tool_call_id,
                    "airlock.decision.action": self.action,
                    "airlock.decision.via": self.via,
                    "airlock.decision.outcome": self.outcome,
                    "enduser.id": self.actor_ref,
                },
            )


def audit(entry: Entry) -> None:
    """Append a decision attempt's ``DecisionAttempt`` row and trace it: the one writer of
    decision attempts, refused ones included (SPEC §7). Joins the caller's transaction."""
    rows.execute(sql.AUDIT_ATTEMPT, entry.params())
    entry.trace()


def attempt(
    tool_call_id: str,
    action: Action,
    actor: Actor,
    via: str,
    decide: Callable[[Attempt], Result],
) -> Outcome:
    """Hold the call's decision (a transaction holding its run's lock) while ``decide`` makes
    it, and audit the attempt whatever came of it. A refusal (an ``AgentCoreError`` from
    ``decide``) is raised once its audit row has committed; a call the actor may not see is
    unknown (404), as SPEC §7 says."""
    guards.check_via(via)
    refusal: AgentCoreError | None = None
    outcome: Outcome | None = None
    with decision(tool_call_id, sql.LOCK_CALL_WITH_QUORUM) as found:
        if found is None or not guards.may_see(actor, found.call):
            # Unseen is unknown (SPEC §7): a 403 would confirm that the id exists.
            refusal = NotFound(f"no tool call {tool_call_id}")
            audit(
                Entry.refused(
                    tool_call_id, found.call if found else None, action, actor, via, refusal
                )
            )
        else:
            current = Attempt(found, action, actor, via)
            needed = found.joined["quorum_needed"] or 1
            current.card_digest = evidence.CallCard.of(found.call, needed).digest
            try:
                result = decide(current)
            except AgentCoreError as exc:
                refusal = exc
            if refusal is not None:
                audit(current.entry(refusal.code).noted(refusal.message))
            else:
                entry = current.entry(result)
                if current.audited:
                    entry.trace()  # its row rode on the settling statement
                else:
                    audit(entry)
                outcome = Outcome(result, found.call, current.standing)
    if refusal is not None:
        raise refusal
    assert outcome is not None
    return outcome


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
    if call.expires_at is not None and call.expires_at <= clock.now():
        expire(held)
        raise ApprovalExpired()


def expire(held: Decision) -> bool:
    """``pending_approval → expired``, decided by the system (``decided_via="expiry"``) and
    audited as its attempt; ``False`` when the call was no longer pending."""
    if not held.settle(CallStatus.EXPIRED, decided_by_ref=SYSTEM.ref, decided_via="expiry"):
        return False
    audit(Entry.of(held.call, Action.EXPIRE, SYSTEM, "expiry", Result.APPLIED))
    return True
