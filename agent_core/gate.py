"""The approval gate: how the loop asks whether an action call may run, without importing it.

``AGENT["APPROVAL_GATE"]`` names the implementation, the way Django reaches an authentication
backend. Unset, it is the gate an installed app declares (``approvals.gate.ApprovalGate`` when
``approvals`` is installed, see ``agent_core.extensions``), else ``RefuseActions``: a core-only
install has nobody to ask, so it fails safe and runs no action call at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from django.db.models import Q
from django.utils.module_loading import import_string

from .actors import Actor
from .agents import get_agent
from .conf import agent_settings
from .extensions import declared_gate
from .models import Thread, ToolCall
from .tools import ToolSpec


@dataclass(frozen=True)
class Verdict:
    """The gate's answer for one action call, stored on the call when it is proposed."""

    required: bool
    approver: str = ""
    expires_at: datetime | None = None
    # Set when a standing grant approves the call without asking (``decided_via="remembered"``).
    remembered_by_ref: str = ""
    # Set when the call may not run at all: it is ``refused`` and the model is told this reason.
    refused: str = ""


@dataclass(frozen=True)
class TextReply:
    """What a chat message that was a decision (SPEC §17, text decisions) is answered: ``text``
    for the person; the call it decided, its status now, the outcome (``applied`` /
    ``unchanged``) and the run that goes on ("" when it decided nothing, e.g. listing the
    calls to choose from)."""

    text: str
    tool_call_id: str = ""
    status: str = ""
    outcome: str = ""
    run_id: str = ""


class ApprovalGate(Protocol):
    """Reviews proposed action calls inside the suspend transaction."""

    def review(self, call: ToolCall, *, tool: ToolSpec, actor: Actor, thread: Thread) -> Verdict:
        """Whether ``call`` needs a person's yes, whose, and until when."""
        ...

    def requested(self, calls: Sequence[ToolCall]) -> None:
        """``calls`` now wait on people: record, in the transaction that asks (the suspend
        transaction, or the one that asks again for an in-doubt call), what asking involves —
        the approvals app's notifications — so it commits with the request or not at all."""
        ...

    def may_run(self, call: ToolCall, *, tool: ToolSpec) -> str:
        """Right before an approved independent proposal executes (SPEC §17): "" when its
        requester is still an actor who may run it, else why not (it is refused, not run)."""
        ...

    def proposal_ended(self, call: ToolCall) -> None:
        """In the transaction that records the end of a proposal's execution: what its decision
        asked to take effect only then (a remembered approval)."""
        ...

    def decide_by_text(self, actor: Actor, thread: Thread, text: str) -> TextReply | None:
        """Decide the thread's pending call when ``text`` is, as a whole, a decision word
        (through the approval port, ``decided_via="text"``); ``None``: it is a message for the
        model."""
        ...

    def decidable(self, actor: Actor) -> Q:
        """The calls ``actor`` may decide other than as the approver stored on them (a call
        escalated to its role, a policy's rule of its own), as a filter on ``ToolCall``: whoever
        may decide a call may see its run and thread (``agent_core.engine.access``)."""
        ...


class RefuseActions:
    """The gate of an install without an approval app: every action call is refused, so nothing
    with an effect runs unapproved and nothing waits on a person nobody can reach."""

    reason = (
        "No approval app is installed, so this action cannot run (install 'approvals' or set "
        "AGENT['APPROVAL_GATE'])."
    )

    def review(self, call: ToolCall, *, tool: ToolSpec, actor: Actor, thread: Thread) -> Verdict:
        return Verdict(required=True, refused=self.reason)

    def requested(self, calls: Sequence[ToolCall]) -> None:
        pass  # it asks nobody: no call of it ever waits on a person

    def may_run(self, call: ToolCall, *, tool: ToolSpec) -> str:
        return self.reason

    def proposal_ended(self, call: ToolCall) -> None:
        pass  # nobody approved anything here

    def decide_by_text(self, actor: Actor, thread: Thread, text: str) -> TextReply | None:
        return None  # nothing here waits on a person

    def decidable(self, actor: Actor) -> Q:
        return Q(pk__in=[])  # nobody decides anything here


def gate_path() -> str:
    """The dotted path of the gate in effect: the setting, an installed app's, or the core's."""
    return agent_settings().APPROVAL_GATE or declared_gate() or "agent_core.gate.RefuseActions"


def get_gate() -> ApprovalGate:
    """The approval gate in effect."""
    gate: ApprovalGate = import_string(gate_path())()
    return gate


def cases_of(branches: Q) -> list[Q]:
    """The cases of an ``OR`` filter (a policy's ``decidable``), each a filter of its own."""
    if branches.connector != Q.OR or branches.negated:
        return [branches]
    return [case if isinstance(case, Q) else Q(case) for case in branches.children]


def text_decision(actor: Actor, thread: Thread, text: str) -> TextReply | None:
    """A chat message on ``thread`` taken as a decision when its agent accepts text decisions
    (``Agent.text_decisions``) and the gate finds one in it; ``None``: start a turn with it."""
    if not get_agent(thread.agent).text_decisions:
        return None
    return get_gate().decide_by_text(actor, thread, text)
