"""The approval port: the one decision path for every surface (REST, console, CLI, chat).

Surfaces authenticate and hand over the actor; the port authorizes against the policy and
decides through the core's decision primitives, which hold the run's row lock (``attempts``:
every attempt, refused ones included, appends a ``DecisionAttempt``; a refusal raises after the
audit row has committed).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pydantic
from django.utils import timezone

from agent_core.actors import Actor
from agent_core.agents import get_agent
from agent_core.choices import CallStatus, RunKind
from agent_core.conf import agent_settings
from agent_core.decisions import Decision, decision
from agent_core.exceptions import AlreadyAnswered, AlreadyDecided, RunNotActive
from agent_core.models import ToolCall

from . import guards, quorum
from .attempts import Attempt, Outcome, attempt, check_deadline, conflict, expire
from .conf import approvals_settings
from .exceptions import InvalidDecision, NotApprover
from .models import Action, RememberedApproval
from .policy import get_policy

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

# A human tool's question is answered (succeeded) or skipped (rejected: nothing else rejects one).
_ANSWERED = frozenset({CallStatus.SUCCEEDED, CallStatus.REJECTED})


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
    return approval(tool_call_id, actor=actor, remember=remember, via=via, args=args).done


def approval(
    tool_call_id: str,
    *,
    actor: Actor,
    remember: bool = False,
    via: str = "web",
    args: dict[str, Any] | None = None,
) -> Attempt:
    """``approve``, answering the attempt itself: the call as it left it, its quorum standing
    (what the API answers, without reading the call again)."""
    with attempt(tool_call_id, Action.APPROVE, actor, via) as current:
        current.outcome = _settle(
            current, CallStatus.APPROVED, actor, via, remember=remember, args=args
        )
    return current


def reject(tool_call_id: str, *, actor: Actor, reason: str = "", via: str = "web") -> Outcome:
    """Reject a pending call; the model is told ``reason`` and that the tool did not run."""
    return rejection(tool_call_id, actor=actor, reason=reason, via=via).done


def rejection(tool_call_id: str, *, actor: Actor, reason: str = "", via: str = "web") -> Attempt:
    """``reject``, answering the attempt itself (as ``approval`` does)."""
    with attempt(tool_call_id, Action.REJECT, actor, via) as current:
        current.note = reason
        current.outcome = _settle(current, CallStatus.REJECTED, actor, via, reason=reason)
    return current


def answer(tool_call_id: str, *, actor: Actor, answer: Any, via: str = "web") -> Outcome:
    """Answer a human tool's question; the answer, validated, becomes the call's result."""
    with attempt(tool_call_id, Action.ANSWER, actor, via) as current:
        # The audit keeps what was answered, as the call's result keeps it.
        current.note = json.dumps(answer, ensure_ascii=False, default=str)
        current.outcome = _answer(current.decision, actor=actor, via=via, answer=answer)
    return current.done


def skip(tool_call_id: str, *, actor: Actor, via: str = "web") -> Outcome:
    """Skip a human tool's question: recorded ``rejected`` with the answer schema's defaults (if
    it has them all) as the result; the model is told the question was skipped."""
    with attempt(tool_call_id, Action.SKIP, actor, via) as current:
        current.outcome = _skip(current.decision, actor=actor, via=via)
    return current.done


def mark_done(
    tool_call_id: str, *, actor: Actor, result: Any = None, via: str = "console"
) -> Outcome:
    """A person says an in-doubt call did happen: ``result`` is recorded, nothing runs again,
    and the run resumes. Whoever ``may_resolve`` it may; audited."""
    with attempt(tool_call_id, Action.MARK_DONE, actor, via) as current:
        current.outcome = _resolve(current.decision, done=True, actor=actor, result=result)
    return current.done


def mark_not_done(tool_call_id: str, *, actor: Actor, via: str = "console") -> Outcome:
    """A person says an in-doubt call did not happen: it runs again (after a fresh approval when
    its tool's ``approval_scope`` is ``"attempt"``); audited."""
    with attempt(tool_call_id, Action.MARK_NOT_DONE, actor, via) as current:
        current.outcome = _resolve(current.decision, done=False, actor=actor)
    return current.done


def may_resolve(actor: Actor, call: ToolCall) -> bool:
    """Who may mark an in-doubt call done / not done: whoever may decide it, and any operator
    (``AGENT["OPERATOR_ROLE"]``), so a call whose approver is gone never blocks its run."""
    return actor.has_role(agent_settings().OPERATOR_ROLE) or get_policy().can_decide(actor, call)


def _resolve(held: Decision, *, done: bool, actor: Actor, result: Any = None) -> Outcome:
    run, call = held.run, held.call
    if not may_resolve(actor, call):
        raise NotApprover()
    if call.status != CallStatus.IN_DOUBT:
        if run.is_terminal:
            raise RunNotActive()
        raise AlreadyDecided(f"{call.pk} is {call.status}, not in doubt")
    held.resolve(done=done, decided_by_ref=actor.ref, result=result)
    return Outcome.APPLIED


def _settle(
    current: Attempt,
    wanted: CallStatus,
    actor: Actor,
    via: str,
    *,
    remember: bool = False,
    reason: str = "",
    args: dict[str, Any] | None = None,
) -> Outcome:
    held = current.decision
    run, call = held.run, held.call
    if call.kind == "human":
        raise InvalidDecision("this call asks a question: answer it instead")
    if not get_policy().can_decide(actor, call):
        raise NotApprover()
    if call.status != CallStatus.PENDING_APPROVAL:
        if _repeats(call, wanted, remember=remember, args=args):
            return Outcome.UNCHANGED
        raise conflict(run, call)
    check_deadline(held)
    tool = get_agent(run.agent).get_tool(call.tool_name)
    if remember and not get_policy().may_remember(tool, call):
        raise InvalidDecision(f"{call.tool_name} approvals cannot be remembered")
    if args is not None:
        args = _validated(tool.validate_args, args, "the edited arguments")
        guards.check_edit(run, call, tool, args)
    if wanted == CallStatus.APPROVED:
        tally = quorum.vote(held, actor, via, remember=remember, args=args)
        current.note += tally.note  # where the quorum's count stands
        current.standing = tally.standing
        if tally.vote != quorum.Vote.COMPLETE:
            return Outcome.UNCHANGED if tally.vote == quorum.Vote.REPEATED else Outcome.APPLIED
    held.settle(
        wanted,
        decided_by_ref=actor.ref,
        decided_via=via,
        reason=reason,
        remember=remember,
        args=args,
        riding=current.audited_by(Outcome.APPLIED),
    )
    if remember and run.kind != RunKind.PROPOSAL:
        _remember(call, actor)  # a proposal's grant waits for its execution (the gate's)
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


def _answer(held: Decision, *, actor: Actor, via: str, answer: Any) -> Outcome:
    _check_question(held, actor, "this call asks for an approval, not an answer")
    tool = get_agent(held.run.agent).get_tool(held.call.tool_name)
    value = _validated(tool.validate_answer, answer, "the answer")
    held.answer(value, decided_by_ref=actor.ref, via=via)
    return Outcome.APPLIED


def _skip(held: Decision, *, actor: Actor, via: str) -> Outcome:
    if held.call.kind == "human" and held.call.status == CallStatus.REJECTED:
        if get_policy().can_answer(actor, held.call):
            return Outcome.UNCHANGED  # skipped already
    _check_question(held, actor, "this call asks for an approval: reject it instead")
    tool = get_agent(held.run.agent).get_tool(held.call.tool_name)
    held.skip(tool.answer_defaults(), decided_by_ref=actor.ref, via=via)
    return Outcome.APPLIED


def _check_question(held: Decision, actor: Actor, not_human: str) -> None:
    """Refuse an answer or a skip of anything but a question ``actor`` may answer, still
    waiting for its answer."""
    call = held.call
    if call.kind != "human":
        raise InvalidDecision(not_human)
    if not get_policy().can_answer(actor, call):
        raise NotApprover()
    if call.status != CallStatus.PENDING_INPUT:
        if call.status in _ANSWERED:
            raise AlreadyAnswered()
        raise RunNotActive()


def _validated(validate: Callable[[Any], Any], value: Any, what: str) -> Any:
    try:
        return validate(value)
    except pydantic.ValidationError as exc:
        errors = json.loads(exc.json(include_url=False, include_context=False))
        raise InvalidDecision(f"{what} do not fit the schema", errors=errors) from exc


def grant_remembered(call: ToolCall) -> None:
    """The grant an independent proposal approved with ``remember`` asked for, once it ran."""
    _remember(call, Actor(ref=call.decided_by_ref))


def _remember(call: ToolCall, actor: Actor) -> None:
    ttl = approvals_settings().remember_ttl_for(call.tool_name)
    RememberedApproval.objects.create(
        thread_id=call.thread_id,
        tool_name=call.tool_name,
        granted_by_ref=actor.ref,
        source_tool_call=call,
        expires_at=timezone.now() + ttl if ttl else None,
    )


def expire_due(limit: int = 500) -> int:
    """Settle pending approvals whose deadline passed (the periodic sweep); returns how many.

    Each call settles in its own transaction under its run's lock, so a decision arriving at the
    same moment and the sweep agree on one outcome, recorded once.
    """
    due = list(
        ToolCall.objects.filter(status=CallStatus.PENDING_APPROVAL, expires_at__lte=timezone.now())
        .order_by("expires_at")
        .values_list("pk", flat=True)[:limit]
    )
    expired = 0
    for call_id in due:
        with decision(call_id) as held:
            if (
                held is not None
                and held.call.status == CallStatus.PENDING_APPROVAL
                and expire(held)
            ):
                expired += 1
    return expired
