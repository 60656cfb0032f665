"""The approval port: the one decision path for every surface (REST, console, CLI, chat).

Surfaces authenticate and hand over the actor; the port authorizes against the policy, decides
with a compare-and-set under the run's row lock, and appends a ``DecisionAttempt`` for every
attempt, refused ones included. A refusal raises after the audit row has committed.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any

import pydantic
from django.db import transaction
from django.utils import timezone

from agent_core import services as core
from agent_core.actors import SYSTEM, Actor
from agent_core.agents import get_agent
from agent_core.exceptions import (
    AgentCoreError,
    AlreadyAnswered,
    AlreadyDecided,
    NotFound,
    RunNotActive,
    ToolNotFound,
)
from agent_core.models import CallStatus, Run, ToolCall

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


def approve(
    tool_call_id: str,
    *,
    actor: Actor,
    remember: bool = False,
    via: str = "web",
    args: dict[str, Any] | None = None,
) -> Outcome:
    """Approve a pending call (optionally with edited ``args``); the run resumes on commit."""
    return _decide(tool_call_id, Action.APPROVE, actor=actor, via=via, remember=remember, args=args)


def reject(tool_call_id: str, *, actor: Actor, reason: str = "", via: str = "web") -> Outcome:
    """Reject a pending call; the model is told ``reason`` and that the tool did not run."""
    return _decide(tool_call_id, Action.REJECT, actor=actor, via=via, reason=reason)


def answer(tool_call_id: str, *, actor: Actor, answer: Any, via: str = "web") -> Outcome:
    """Answer a human tool's question; the answer, validated, becomes the call's result."""
    return _decide(tool_call_id, Action.ANSWER, actor=actor, via=via, answer=answer)


def mark_done(
    tool_call_id: str, *, actor: Actor, result: Any = None, via: str = "console"
) -> Outcome:
    """A person says an in-doubt call did happen: ``result`` is recorded, nothing runs again,
    and the run resumes."""
    return _decide(tool_call_id, Action.MARK_DONE, actor=actor, via=via, result=result)


def mark_not_done(tool_call_id: str, *, actor: Actor, via: str = "console") -> Outcome:
    """A person says an in-doubt call did not happen: it runs again (after a fresh approval when
    its tool's ``approval_scope`` is ``"attempt"``)."""
    return _decide(tool_call_id, Action.MARK_NOT_DONE, actor=actor, via=via)


def _decide(tool_call_id: str, action: Action, *, actor: Actor, via: str, **kw: Any) -> Outcome:
    with transaction.atomic():
        call = ToolCall.objects.filter(pk=tool_call_id).first()
        refusal: AgentCoreError | None = None
        outcome: Outcome | None = None
        if call is None:
            refusal = NotFound(f"no tool call {tool_call_id}")
        else:
            run = core.lock_run(call.run_id)
            call.refresh_from_db()
            try:
                outcome = _apply(run, call, action, actor=actor, via=via, **kw)
            except AgentCoreError as exc:
                refusal = exc
        _audit(tool_call_id, call, action, actor, via, outcome, refusal)
    if refusal is not None:
        raise refusal
    assert outcome is not None
    return outcome


def _apply(
    run: Run, call: ToolCall, action: Action, *, actor: Actor, via: str, **kw: Any
) -> Outcome:
    policy = get_policy()
    allowed = policy.can_answer if action == Action.ANSWER else policy.can_decide
    if not allowed(actor, call):
        raise NotApprover()
    if action == Action.ANSWER:
        return _answer(run, call, actor=actor, via=via, answer=kw["answer"])
    if action in (Action.MARK_DONE, Action.MARK_NOT_DONE):
        return _resolve(run, call, done=action == Action.MARK_DONE, actor=actor, **kw)
    wanted = CallStatus.APPROVED if action == Action.APPROVE else CallStatus.REJECTED
    if call.status == CallStatus.PENDING_APPROVAL:
        if call.expires_at is not None and call.expires_at <= timezone.now():
            _expire(run, call)
            raise ApprovalExpired()
        args = kw.get("args")
        if args is not None:
            args = _validated_args(run, call, args)
        core.settle_approval(
            run,
            call,
            status=wanted,
            decided_by_ref=actor.ref,
            decided_via=via,
            reason=kw.get("reason", ""),
            remember=kw.get("remember", False),
            args=args,
        )
        if wanted == CallStatus.APPROVED and kw.get("remember"):
            _remember(run, call, actor)
        return Outcome.APPLIED
    repeated = (
        call.status in _APPROVED_ONCE
        if wanted == CallStatus.APPROVED
        else (call.status == CallStatus.REJECTED)
    )
    if repeated and call.decided_at is not None and call.decided_via not in ("", "policy"):
        return Outcome.UNCHANGED
    if call.status == CallStatus.EXPIRED:
        raise ApprovalExpired()
    if call.status == CallStatus.CANCELLED or (run.is_terminal and call.decided_at is None):
        raise RunNotActive()
    raise AlreadyDecided(f"{call.pk} is already {call.status}")


def _answer(run: Run, call: ToolCall, *, actor: Actor, via: str, answer: Any) -> Outcome:
    if call.status != CallStatus.PENDING_INPUT:
        if call.status == CallStatus.SUCCEEDED:
            raise AlreadyAnswered()
        raise RunNotActive()
    tool = get_agent(run.agent).get_tool(call.tool_name)
    try:
        value = tool.validate_answer(answer)
    except pydantic.ValidationError as exc:
        raise InvalidDecision(
            "the answer does not fit the question's schema", errors=_errors(exc)
        ) from exc
    core.answer_input(run, call, answer=value, decided_by_ref=actor.ref, via=via)
    return Outcome.APPLIED


def _resolve(run: Run, call: ToolCall, *, done: bool, actor: Actor, result: Any = None) -> Outcome:
    if call.status != CallStatus.IN_DOUBT:
        if run.is_terminal:
            raise RunNotActive()
        raise AlreadyDecided(f"{call.pk} is {call.status}, not in doubt")
    try:
        per_attempt = get_agent(run.agent).get_tool(call.tool_name).approval_scope == "attempt"
    except ToolNotFound:
        per_attempt = False  # the tool is gone; a re-run will fail the call, nothing runs
    core.resolve_in_doubt(
        call.pk,
        done=done,
        result=result,
        reapprove=not done and per_attempt,
        decided_by_ref=actor.ref,
    )
    return Outcome.APPLIED


def _validated_args(run: Run, call: ToolCall, args: dict[str, Any]) -> dict[str, Any]:
    tool = get_agent(run.agent).get_tool(call.tool_name)
    try:
        return tool.validate_args(args)
    except pydantic.ValidationError as exc:
        raise InvalidDecision(
            "the edited arguments do not fit the tool's schema", errors=_errors(exc)
        ) from exc


def _errors(exc: pydantic.ValidationError) -> list[dict[str, Any]]:
    errors: list[dict[str, Any]] = json.loads(exc.json(include_url=False, include_context=False))
    return errors


def _remember(run: Run, call: ToolCall, actor: Actor) -> None:
    if get_agent(run.agent).get_tool(call.tool_name).rememberable:
        RememberedApproval.objects.create(
            thread_id=call.thread_id,
            tool_name=call.tool_name,
            granted_by_ref=actor.ref,
            source_tool_call=call,
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
        detail=refusal.message if refusal else "",
    )


def expire_due(limit: int = 500) -> int:
    """Settle pending approvals whose deadline passed (the periodic sweep); returns how many."""
    due = list(
        ToolCall.objects.filter(
            status=CallStatus.PENDING_APPROVAL, expires_at__lte=timezone.now()
        ).values_list("pk", "run_id")[:limit]
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
