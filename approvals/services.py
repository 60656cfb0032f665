"""The approval port: the one decision path for every surface (REST, console, CLI, chat).

Surfaces authenticate and hand over the actor; the port authorizes against the policy, decides
with a compare-and-set under the run's row lock, and appends a ``DecisionAttempt`` for every
attempt, refused ones included. A refusal raises after the audit row has committed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from enum import StrEnum
from typing import Any

import pydantic
from django.db import transaction
from django.utils import timezone

from agent_core import services as core
from agent_core.actors import SYSTEM, Actor
from agent_core.agents import get_agent
from agent_core.conf import agent_settings
from agent_core.exceptions import (
    AgentCoreError,
    AlreadyAnswered,
    AlreadyDecided,
    NotFound,
    RunNotActive,
    ToolNotFound,
)
from agent_core.models import CallStatus, Run, ToolCall

from . import guards, quorum
from .conf import approvals_settings
from .exceptions import ApprovalExpired, InvalidDecision, NotApprover
from .models import Action, DecisionAttempt, RememberedApproval
from .policy import get_policy


class Outcome(StrEnum):
    """A successful decision either changed the call or repeated what was already decided."""

    APPLIED = "applied"
    UNCHANGED = "unchanged"


# Statuses a call reaches only after someone (or something) said yes.
_APPROVED_ONCE = frozenset(
    {
        CallStatus.APPROVED,
        CallStatus.EXECUTING,
        CallStatus.SUCCEEDED,
        CallStatus.FAILED,
        CallStatus.IN_DOUBT,
    }
)

Apply = Callable[[Run, ToolCall], Outcome]


def approve(
    tool_call_id: str,
    *,
    actor: Actor,
    remember: bool = False,
    via: str = "web",
    args: dict[str, Any] | None = None,
) -> Outcome:
    """Approve a pending call (optionally with edited ``args``); the run resumes on commit.

    ``remember`` also approves later calls of the same tool in the same thread (rememberable
    tools only) until the grant expires (``APPROVALS["REMEMBER_TTL"]``) or is revoked.
    """

    notes: list[str] = []  # where a quorum's count stands, for the audit

    def apply(run: Run, call: ToolCall) -> Outcome:
        return _settle(
            run, call, CallStatus.APPROVED, actor, via, remember=remember, args=args, notes=notes
        )

    return _attempt(tool_call_id, Action.APPROVE, actor, via, apply, detail=lambda: "".join(notes))


def reject(tool_call_id: str, *, actor: Actor, reason: str = "", via: str = "web") -> Outcome:
    """Reject a pending call; the model is told ``reason`` and that the tool did not run."""

    def apply(run: Run, call: ToolCall) -> Outcome:
        return _settle(run, call, CallStatus.REJECTED, actor, via, reason=reason)

    return _attempt(tool_call_id, Action.REJECT, actor, via, apply, detail=lambda: reason)


def answer(tool_call_id: str, *, actor: Actor, answer: Any, via: str = "web") -> Outcome:
    """Answer a human tool's question; the answer, validated, becomes the call's result."""

    def apply(run: Run, call: ToolCall) -> Outcome:
        return _answer(run, call, actor=actor, via=via, answer=answer)

    # The audit keeps what was answered, as the call's result keeps it.
    def answered() -> str:
        return json.dumps(answer, ensure_ascii=False, default=str)

    return _attempt(tool_call_id, Action.ANSWER, actor, via, apply, detail=answered)


def mark_done(
    tool_call_id: str, *, actor: Actor, result: Any = None, via: str = "console"
) -> Outcome:
    """A person says an in-doubt call did happen: ``result`` is recorded, nothing runs again,
    and the run resumes. Whoever ``may_resolve`` it may; audited."""

    def apply(run: Run, call: ToolCall) -> Outcome:
        return _resolve(run, call, done=True, actor=actor, result=result)

    return _attempt(tool_call_id, Action.MARK_DONE, actor, via, apply)


def mark_not_done(tool_call_id: str, *, actor: Actor, via: str = "console") -> Outcome:
    """A person says an in-doubt call did not happen: it runs again (after a fresh approval when
    its tool's ``approval_scope`` is ``"attempt"``); audited."""

    def apply(run: Run, call: ToolCall) -> Outcome:
        return _resolve(run, call, done=False, actor=actor)

    return _attempt(tool_call_id, Action.MARK_NOT_DONE, actor, via, apply)


def may_resolve(actor: Actor, call: ToolCall) -> bool:
    """Who may mark an in-doubt call done / not done: whoever may decide it, and any operator
    (``AGENT["OPERATOR_ROLE"]``), so a call whose approver is gone never blocks its run."""
    return actor.has_role(agent_settings().OPERATOR_ROLE) or get_policy().can_decide(actor, call)


def _resolve(run: Run, call: ToolCall, *, done: bool, actor: Actor, result: Any = None) -> Outcome:
    if not may_resolve(actor, call):
        raise NotApprover()
    if call.status != CallStatus.IN_DOUBT:
        if run.is_terminal:
            raise RunNotActive()
        raise AlreadyDecided(f"{call.pk} is {call.status}, not in doubt")
    try:
        per_attempt = get_agent(run.agent).get_tool(call.tool_name).approval_scope == "attempt"
    except ToolNotFound:
        per_attempt = False  # the tool is gone; a re-run fails the call, nothing runs
    core.resolve_in_doubt(
        call.pk,
        done=done,
        result=result,
        reapprove=not done and per_attempt,
        decided_by_ref=actor.ref,
    )
    return Outcome.APPLIED


def _attempt(
    tool_call_id: str,
    action: Action,
    actor: Actor,
    via: str,
    apply: Apply,
    *,
    detail: Callable[[], str] | None = None,
) -> Outcome:
    """Run ``apply`` under the run's row lock and audit the attempt, whatever came of it."""
    guards.check_via(via)
    with transaction.atomic():
        found = core.lock_call(tool_call_id)
        call = found[1] if found else None
        refusal: AgentCoreError | None = None
        outcome: Outcome | None = None
        if found is None or not guards.may_see(actor, found[1]):
            # Unseen is unknown (SPEC §7): a 403 would confirm that the id exists.
            refusal = NotFound(f"no tool call {tool_call_id}")
        else:
            try:
                outcome = apply(*found)
            except AgentCoreError as exc:
                refusal = exc
        note = refusal.message if refusal else detail() if detail else ""
        _audit(tool_call_id, call, action, actor, via, outcome, refusal, note)
    if refusal is not None:
        raise refusal
    assert outcome is not None
    return outcome


def _settle(
    run: Run,
    call: ToolCall,
    wanted: CallStatus,
    actor: Actor,
    via: str,
    *,
    remember: bool = False,
    reason: str = "",
    args: dict[str, Any] | None = None,
    notes: list[str] | None = None,
) -> Outcome:
    if call.kind == "human":
        raise InvalidDecision("this call asks a question: answer it instead")
    if not get_policy().can_decide(actor, call):
        raise NotApprover()
    if call.status != CallStatus.PENDING_APPROVAL:
        if _repeats(call, wanted, remember=remember, args=args):
            return Outcome.UNCHANGED
        raise _conflict(run, call)
    _check_deadline(run, call)
    tool = get_agent(run.agent).get_tool(call.tool_name)
    if remember and not get_policy().may_remember(tool, call):
        raise InvalidDecision(f"{call.tool_name} approvals cannot be remembered")
    if args is not None:
        args = _validated(tool.validate_args, args, "the edited arguments")
        guards.check_edit(run, call, tool, args)
    if wanted == CallStatus.APPROVED:
        tally = quorum.vote(run, call, actor, via, remember=remember, args=args)
        if notes is not None and tally.note:
            notes.append(tally.note)
        if tally.vote != quorum.Vote.COMPLETE:
            return Outcome.UNCHANGED if tally.vote == quorum.Vote.REPEATED else Outcome.APPLIED
    core.settle_approval(
        run,
        call,
        status=wanted,
        decided_by_ref=actor.ref,
        decided_via=via,
        reason=reason,
        remember=remember,
        args=args,
    )
    if remember:
        _remember(call, actor)
    return Outcome.APPLIED


def _repeats(
    call: ToolCall, wanted: CallStatus, *, remember: bool, args: dict[str, Any] | None
) -> bool:
    """Whether a decision on an already decided call is an identical repeat (200 ``unchanged``).

    A yes with other edited args, or one asking to remember what was not remembered, is not.
    """
    if call.decided_at is None or call.decided_via in ("", "policy", "expiry"):
        return False
    if wanted == CallStatus.REJECTED:
        return call.status == CallStatus.REJECTED
    if call.status not in _APPROVED_ONCE:
        return False
    if remember and not call.remember:
        return False
    return args is None or args == call.args


def _conflict(run: Run, call: ToolCall) -> AgentCoreError:
    if call.status == CallStatus.EXPIRED:
        return ApprovalExpired()
    if call.status == CallStatus.CANCELLED or (run.is_terminal and call.decided_at is None):
        return RunNotActive()
    return AlreadyDecided(f"{call.pk} is already {call.status}")


def _check_deadline(run: Run, call: ToolCall) -> None:
    """Guarantee 9 at decision time: a request past its deadline expires now and answers 410."""
    if call.expires_at is not None and call.expires_at <= timezone.now():
        if _expire(run, call):
            _audit(call.pk, call, Action.EXPIRE, SYSTEM, "expiry", Outcome.APPLIED, None, "")
        raise ApprovalExpired()


def _answer(run: Run, call: ToolCall, *, actor: Actor, via: str, answer: Any) -> Outcome:
    if call.kind != "human":
        raise InvalidDecision("this call asks for an approval, not an answer")
    if not get_policy().can_answer(actor, call):
        raise NotApprover()
    if call.status != CallStatus.PENDING_INPUT:
        if call.status == CallStatus.SUCCEEDED:
            raise AlreadyAnswered()
        raise RunNotActive()
    tool = get_agent(run.agent).get_tool(call.tool_name)
    value = _validated(tool.validate_answer, answer, "the answer")
    core.answer_input(run, call, answer=value, decided_by_ref=actor.ref, via=via)
    return Outcome.APPLIED


def _validated(validate: Callable[[Any], Any], value: Any, what: str) -> Any:
    try:
        return validate(value)
    except pydantic.ValidationError as exc:
        errors = json.loads(exc.json(include_url=False, include_context=False))
        raise InvalidDecision(f"{what} do not fit the schema", errors=errors) from exc


def _remember(call: ToolCall, actor: Actor) -> None:
    ttl = approvals_settings().remember_ttl_for(call.tool_name)
    RememberedApproval.objects.create(
        thread_id=call.thread_id,
        tool_name=call.tool_name,
        granted_by_ref=actor.ref,
        source_tool_call=call,
        expires_at=timezone.now() + ttl if ttl else None,
    )


def _expire(run: Run, call: ToolCall) -> bool:
    return core.settle_approval(
        run, call, status=CallStatus.EXPIRED, decided_by_ref=SYSTEM.ref, decided_via="expiry"
    )


def _audit(
    tool_call_id: str,
    call: ToolCall | None,
    action: Action,
    actor: Actor,
    via: str,
    outcome: Outcome | None,
    refusal: AgentCoreError | None,
    detail: str = "",
) -> None:
    DecisionAttempt.objects.create(
        tool_call_id=tool_call_id,
        run_id=call.run_id if call else "",
        thread_id=call.thread_id if call else "",
        tool_name=call.tool_name if call else "",
        action=action,
        actor_ref=actor.ref,
        via=via,
        outcome=outcome.value if outcome else refusal.code if refusal else "",
        detail=detail,
    )


def expire_due(limit: int = 500) -> int:
    """Settle pending approvals whose deadline passed (the periodic sweep); returns how many.

    Each call settles in its own transaction under its run's lock, so a decision arriving at the
    same moment and the sweep agree on one outcome, recorded once.
    """
    due = list(
        ToolCall.objects.filter(status=CallStatus.PENDING_APPROVAL, expires_at__lte=timezone.now())
        .order_by("expires_at")
        .values_list("pk", "run_id")[:limit]
    )
    expired = 0
    for call_id, run_id in due:
        with transaction.atomic():
            run = core.lock_run(run_id)
            call = ToolCall.objects.get(pk=call_id)
            if call.status == CallStatus.PENDING_APPROVAL and _expire(run, call):
                expired += 1
                _audit(call_id, call, Action.EXPIRE, SYSTEM, "expiry", Outcome.APPLIED, None)
    return expired
