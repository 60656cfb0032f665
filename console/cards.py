"""An inbox card: one pending call, what the viewer may do with it, and what came of it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any

from django import forms
from django.utils import timezone
from django.utils.timesince import timesince

from agent_core.actors import Actor
from agent_core.agents import get_agent
from agent_core.choices import CallStatus, Role
from agent_core.engine.access import is_operator
from agent_core.exceptions import AgentCoreError, AlreadyAnswered, AlreadyDecided, RunNotActive
from agent_core.models import Message, ToolCall
from agent_core.toolcalls import delegation
from agent_core.tools import ToolSpec
from approvals import escalation, quorum
from approvals.conf import approvals_settings
from approvals.edits import EditPreview
from approvals.evidence import CallCard
from approvals.exceptions import ApprovalExpired, InvalidDecision, NotApprover
from approvals.models import Approval
from approvals.policy import get_policy

from .forms import EditArgsForm, ExtendForm, RejectForm, RememberForm
from .people import name_of
from .related import Duplicates, Related, duplicates_of, related_to
from .schema_forms import form_class_for


@dataclass(frozen=True)
class CallContext:
    """The conversation around a call, for deciding it without opening the run."""

    user_text: str
    model_text: str
    asked_by: str = ""  # the agent that delegated the run; "" when a person asked


@dataclass
class Card:
    """A call as the inbox shows it to one viewer."""

    call: ToolCall
    may_decide: bool
    tool: ToolSpec | None
    answer_form: forms.Form | None = None
    edit_form: forms.Form | None = None
    reject_form: forms.Form | None = None
    extend_form: forms.Form | None = None
    remember_form: forms.Form | None = None
    approvals_needed: int = 1  # distinct approvers the call needs (its quorum)
    approvals: list[Approval] = field(default_factory=list)  # given so far
    escalated_to: str = ""  # the role the call was escalated to, once it was
    may_nudge: bool = False  # an operator: Nudge and Escalate now (approvals.nudge, escalation)
    edit_preview: EditPreview | None = None  # edited args shown for confirmation, not decided
    error: str = ""  # why the viewer's last action on this card was refused
    errors: list[str] = field(default_factory=list)  # field-level details of that refusal
    related: Related = field(default_factory=Related)  # calls about the same thing
    duplicates: Duplicates = field(default_factory=Duplicates)  # identical pending calls

    @property
    def is_question(self) -> bool:
        return self.call.status == CallStatus.PENDING_INPUT

    @property
    def is_pending(self) -> bool:
        return self.call.status in (CallStatus.PENDING_APPROVAL, CallStatus.PENDING_INPUT)

    @cached_property
    def shown(self) -> CallCard:
        """What the card shows of the call: the value ``card_digest`` hashes (evidence)."""
        return CallCard.of(self.call, self.approvals_needed)

    @property
    def rememberable(self) -> bool:
        return self.tool is not None and get_policy().may_remember(self.tool, self.call)

    @property
    def remember_ttl(self) -> timedelta | None:
        """How long a grant made from this card would last (None: until revoked)."""
        return approvals_settings().remember_ttl_for(self.call.tool_name)

    @cached_property
    def context(self) -> CallContext:
        """What led to the call: the user's last message, the model's text just before it."""
        said = self.call.message
        asked = (
            Message.objects.filter(thread_id=self.call.thread_id, role=Role.USER, seq__lt=said.seq)
            .order_by("-seq")
            .first()
        )
        # A delegated run's user message is the delegating agent's, never the person's.
        chain = self.agents
        return CallContext(
            user_text=asked.text if asked else "",
            model_text=said.text,
            asked_by=f"{chain[-2]} (agent)" if len(chain) > 1 else "",
        )

    @cached_property
    def agents(self) -> list[str]:
        """The agents from the run a person started down to the call's."""
        return delegation.chain_of(self.call.run)

    @property
    def chain(self) -> str:
        """The agents from the run a person started down to the call's: "support → billing"."""
        return " → ".join(self.agents)

    @property
    def prompt(self) -> str:
        return str(self.call.args.get("question", "")) if self.is_question else ""


def _tool_of(call: ToolCall) -> ToolSpec | None:
    try:
        return get_agent(call.run.agent).get_tool(call.tool_name)
    except AgentCoreError:
        # The agent or tool is no longer deployed: the card is still shown, read-only forms.
        return None


def may_decide(actor: Actor, call: ToolCall) -> bool:
    """Whether the approval policy lets ``actor`` decide (or answer) ``call``."""
    policy = get_policy()
    if call.status == CallStatus.PENDING_INPUT:
        return policy.can_answer(actor, call)
    return policy.can_decide(actor, call)


def answer_form_for(call: ToolCall, data: Any = None, *, tool: ToolSpec | None = None) -> Any:
    """The form of a human question, generated from its tool's answer schema."""
    tool = tool or _tool_of(call)
    form_class = form_class_for((tool.answer_schema if tool else None) or {})
    return form_class(data, prefix=f"a-{call.pk}", auto_id=f"id_%s_{call.pk}")


def card_for(actor: Actor, call: ToolCall, *, data: Any = None, form: str = "") -> Card:
    """The card of ``call`` for ``actor``; ``data`` (bound to the form named ``form``) redisplays
    what the viewer typed, with its errors."""
    tool = _tool_of(call)
    card = Card(call=call, may_decide=may_decide(actor, call), tool=tool)
    card.approvals_needed, card.approvals = quorum.standing(call)
    # A quorum's approval the viewer already gave: the call waits on the others, not on it.
    card.may_decide = card.may_decide and actor.ref not in {a.by_ref for a in card.approvals}
    card.escalated_to = escalation.escalated_to(call) if call.expires_at else ""
    card.may_nudge = is_operator(actor)
    card.related = related_to(actor, call, tool)
    card.duplicates = duplicates_of(actor, call)
    if not card.may_decide:
        return card
    if card.is_question:
        card.answer_form = answer_form_for(call, data if form == "answer" else None, tool=tool)
        return card
    card.reject_form = RejectForm(
        data if form == "reject" else None, auto_id=f"id_%s_reject_{call.pk}"
    )
    if call.expires_at is not None:
        card.extend_form = ExtendForm(
            data if form == "extend" else None, auto_id=f"id_%s_extend_{call.pk}"
        )
    if card.rememberable:
        card.remember_form = RememberForm(
            data if form == "remember" else None,
            initial={"pins": _json(call.args)},
            auto_id=f"id_%s_remember_{call.pk}",
        )
    card.edit_form = EditArgsForm(
        data if form == "edit" else None,
        initial={"args": _json(call.args)},
        auto_id=f"id_%s_edit_{call.pk}",
    )
    return card


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def ago_text(when: datetime) -> str:
    """ "3 s ago", "4 minutes ago": seconds count while a conflict is fresh."""
    seconds = int((timezone.now() - when).total_seconds())
    if seconds < 60:
        return f"{max(seconds, 0)} s ago"
    return f"{timesince(when, timezone.now())} ago"


def explain(call: ToolCall) -> str:
    """Why a decision on ``call`` came too late, in the words an operator needs."""
    ago = ago_text(call.decided_at) if call.decided_at else ""
    who = name_of(call.decided_by_ref)
    via = f" (via {call.decided_via})" if call.decided_via not in ("", "console") else ""
    match call.status:
        case CallStatus.EXPIRED:
            return f"This request expired {ago} — nobody decided in time. Nothing ran."
        case CallStatus.CANCELLED:
            return f"The run was cancelled {ago}; this call will not run."
        case CallStatus.REJECTED:
            return f"{who} rejected this {ago}{via}."
        case CallStatus.SUCCEEDED if call.kind == "human":
            return f"{who} answered this {ago}{via}."
        case CallStatus.FAILED if call.decided_at is None:
            return "The run ended before anyone decided; this call will not run."
        case _ if call.decided_via == "remembered":
            return f"A remembered approval let this run {ago}."
        case _ if call.decided_at is not None:
            return f"{who} approved this {ago}{via}; it is now {call.status.replace('_', ' ')}."
    return f"This call is {call.status.replace('_', ' ')}."


def refusal(exc: AgentCoreError, call: ToolCall) -> str:
    """What a refused decision on ``call`` says, on its card and in a bulk decision's results
    alike (the HTTP status is the exception's own ``status_code``)."""
    if isinstance(exc, NotApprover):
        approver = "the requester" if call.approver == "requester" else call.approver
        return f"You may not decide this call: it waits on {approver}."
    if isinstance(exc, InvalidDecision):
        return f"Nothing was decided: {exc.message}."
    if isinstance(exc, AlreadyDecided | AlreadyAnswered | ApprovalExpired | RunNotActive):
        return explain(call)
    return exc.message
