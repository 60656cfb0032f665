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

from agent_core.actors import Actor
from agent_core.agents import get_agent
from agent_core.choices import CallStatus, RunKind
from agent_core.conf import agent_settings
from agent_core.engine import clock
from agent_core.engine.decisions import Decision, decision
from agent_core.exceptions import AlreadyAnswered, AlreadyDecided, NotFound, RunNotActive
from agent_core.models import Run, ToolCall
from agent_core.tools import ToolSpec, args_digest

from . import edits, grants, guards, quorum
from .attempts import Attempt, Outcome, Result, attempt, check_deadline, conflict, expire
from .exceptions import InvalidDecision, NotApprover
from .grants import Scope, scope_of
from .models import Action
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
    remember: bool | Scope = False,
    via: str = "web",
    args: dict[str, Any] | None = None,
) -> Outcome:
    """Approve a pending call (optionally with edited ``args``); the run resumes on commit.

    ``remember`` also approves later calls of the same tool in the same thread (rememberable
    tools only) until the grant expires (``APPROVALS["REMEMBER_TTL"]``) or is revoked; a
    ``Scope`` narrows that to calls matching its arg pins, a number of uses and a shorter ttl
    (``approvals.grants``).
    """

    def decide(current: Attempt) -> Result:
        scope = scope_of(remember)
        return _settle(current, CallStatus.APPROVED, actor, via, scope=scope, args=args)

    return attempt(tool_call_id, Action.APPROVE, actor, via, decide)


def reject(tool_call_id: str, *, actor: Actor, reason: str = "", via: str = "web") -> Outcome:
    """Reject a pending call; the model is told ``reason`` and that the tool did not run."""

    def decide(current: Attempt) -> Result:
        current.note = reason
        return _settle(current, CallStatus.REJECTED, actor, via, reason=reason)

    return attempt(tool_call_id, Action.REJECT, actor, via, decide)


def answer(tool_call_id: str, *, actor: Actor, answer: Any, via: str = "web") -> Outcome:
    """Answer a human tool's question; the answer, validated, becomes the call's result."""

    def decide(current: Attempt) -> Result:
        # The audit keeps what was answered, as the call's result keeps it.
        current.note = json.dumps(answer, ensure_ascii=False, default=str)
        return _answer(current.decision, actor=actor, via=via, answer=answer)

    return attempt(tool_call_id, Action.ANSWER, actor, via, decide)


def skip(tool_call_id: str, *, actor: Actor, via: str = "web") -> Outcome:
    """Skip a human tool's question: recorded ``rejected`` with the answer schema's defaults (if
    it has them all) as the result; the model is told the question was skipped."""

    def decide(current: Attempt) -> Result:
        return _skip(current.decision, actor=actor, via=via)

    return attempt(tool_call_id, Action.SKIP, actor, via, decide)


def mark_done(
    tool_call_id: str, *, actor: Actor, result: Any = None, via: str = "console"
) -> Outcome:
    """A person says an in-doubt call did happen: ``result`` is recorded, nothing runs again,
    and the run resumes. Whoever ``may_resolve`` it may; audited."""

    def decide(current: Attempt) -> Result:
        return _resolve(current.decision, done=True, actor=actor, result=result)

    return attempt(tool_call_id, Action.MARK_DONE, actor, via, decide)


def mark_not_done(tool_call_id: str, *, actor: Actor, via: str = "console") -> Outcome:
    """A person says an in-doubt call did not happen: it runs again (after a fresh approval when
    its tool's ``approval_scope`` is ``"attempt"``); audited."""

    def decide(current: Attempt) -> Result:
        return _resolve(current.decision, done=False, actor=actor)

    return attempt(tool_call_id, Action.MARK_NOT_DONE, actor, via, decide)


def may_resolve(actor: Actor, call: ToolCall) -> bool:
    """Who may mark an in-doubt call done / not done: whoever may decide it, and any operator
    (``AGENT["OPERATOR_ROLE"]``), so a call whose approver is gone never blocks its run."""
    return actor.has_role(agent_settings().OPERATOR_ROLE) or get_policy().can_decide(actor, call)


def _resolve(held: Decision, *, done: bool, actor: Actor, result: Any = None) -> Result:
    run, call = held.run, held.call
    if not may_resolve(actor, call):
        raise NotApprover()
    if call.status != CallStatus.IN_DOUBT:
        if run.is_terminal:
            raise RunNotActive()
        raise AlreadyDecided(f"{call.pk} is {call.status}, not in doubt")
    held.resolve(done=done, decided_by_ref=actor.ref, result=result)
    return Result.APPLIED


def _settle(
    current: Attempt,
    wanted: CallStatus,
    actor: Actor,
    via: str,
    *,
    scope: Scope | None = None,
    reason: str = "",
    args: dict[str, Any] | None = None,
) -> Result:
    held = current.decision
    remember = scope is not None
    run, call = held.run, held.call
    if call.kind == "human":
        raise InvalidDecision("this call asks a question: answer it instead")
    if not get_policy().can_decide(actor, call):
        raise NotApprover()
    if call.status != CallStatus.PENDING_APPROVAL:
        if _repeats(call, wanted, remember=remember, args=args):
            return Result.UNCHANGED
        raise conflict(run, call)
    check_deadline(held)
    tool = get_agent(run.agent).get_tool(call.tool_name)
    if remember and not get_policy().may_remember(tool, call):
        raise InvalidDecision(f"{call.tool_name} approvals cannot be remembered")
    if args is not None:
        edit = _checked_edit(run, call, tool, args)
        args = edit.args
        current.note += edits.describe(edit.changes)  # the audit keeps what the decider changed
    if scope is not None:
        grants.check_narrows(scope, call.tool_name, call.args if args is None else args)
    if wanted == CallStatus.APPROVED:
        current.args_digest = args_digest(call.tool_name, call.args if args is None else args)
        tally = quorum.vote(held, actor, via, remember=remember, args=args)
        current.note = "; ".join(filter(None, (current.note, tally.note)))  # the count so far
        current.standing = tally.standing
        if tally.vote != quorum.Vote.COMPLETE:
            return Result.UNCHANGED if tally.vote == quorum.Vote.REPEATED else Result.APPLIED
    held.settle(
        wanted,
        decided_by_ref=actor.ref,
        decided_via=via,
        reason=reason,
        remember=remember,
        args=args,
        settling=current.audited_by(wanted),
    )
    if scope is not None and run.kind != RunKind.PROPOSAL:
        grants.grant(call, actor, scope)  # a proposal's grant waits for its execution (the gate's)
    return Result.APPLIED


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


def _answer(held: Decision, *, actor: Actor, via: str, answer: Any) -> Result:
    _check_question(held, actor, "this call asks for an approval, not an answer")
    tool = get_agent(held.run.agent).get_tool(held.call.tool_name)
    value = _validated(tool.validate_answer, answer, "the answer")
    held.answer(value, decided_by_ref=actor.ref, via=via)
    return Result.APPLIED


def preview_edit(tool_call_id: str, *, actor: Actor, args: dict[str, Any]) -> edits.EditPreview:
    """Check edited ``args`` as ``approve(args=...)`` would, deciding and recording nothing:
    what the decider sees, and confirms, before an edited approval (404 for an unseen call,
    403 for one the actor may not decide, 400 for args the schema or the tool refuses)."""
    call = ToolCall.objects.select_related("run", "thread").filter(pk=tool_call_id).first()
    if call is None or not guards.may_see(actor, call):
        raise NotFound(f"no tool call {tool_call_id}")
    if not get_policy().can_decide(actor, call):
        raise NotApprover()
    tool = get_agent(call.run.agent).get_tool(call.tool_name)
    return _checked_edit(call.run, call, tool, args)


def _checked_edit(run: Run, call: ToolCall, tool: ToolSpec, args: Any) -> edits.EditPreview:
    valid = _validated(tool.validate_args, args, "the edited arguments")
    requester = Actor(ref=run.actor_ref, roles=frozenset(run.actor_roles))
    ctx = guards.tool_context(call, requester, run.thread)
    need = guards.check_edit(run, call, tool, valid, ctx)
    return edits.EditPreview(args=valid, changes=edits.changes(call.args, valid), requirement=need)


def _skip(held: Decision, *, actor: Actor, via: str) -> Result:
    if held.call.kind == "human" and held.call.status == CallStatus.REJECTED:
        if get_policy().can_answer(actor, held.call):
            return Result.UNCHANGED  # skipped already
    _check_question(held, actor, "this call asks for an approval: reject it instead")
    tool = get_agent(held.run.agent).get_tool(held.call.tool_name)
    held.skip(tool.answer_defaults(), decided_by_ref=actor.ref, via=via)
    return Result.APPLIED


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
    grants.grant(call, Actor(ref=call.decided_by_ref), grants.WHOLE_TOOL)


def expire_due(limit: int = 500) -> int:
    """Settle pending approvals whose deadline passed (the periodic sweep); returns how many.

    Each call settles in its own transaction under its run's lock, so a decision arriving at the
    same moment and the sweep agree on one outcome, recorded once.
    """
    due = list(
        ToolCall.objects.filter(status=CallStatus.PENDING_APPROVAL, expires_at__lte=clock.now())
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
