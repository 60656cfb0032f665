"""The approval gate: how the loop asks whether an action call may run, without importing it.

``AGENT["APPROVAL_GATE"]`` names the implementation (``approvals.gate.ApprovalGate`` by default),
the way Django reaches an authentication backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from django.db.models import Q
from django.utils.module_loading import import_string

from .actors import Actor
from .conf import agent_settings
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


class ApprovalGate(Protocol):
    """Reviews proposed action calls inside the suspend transaction; sweeps expired requests."""

    def review(self, call: ToolCall, *, tool: ToolSpec, actor: Actor, thread: Thread) -> Verdict:
        """Whether ``call`` needs a person's yes, whose, and until when."""
        ...

    def expire_due(self) -> int:
        """Settle every pending request whose deadline passed; return how many."""
        ...

    def decidable(self, actor: Actor) -> Q:
        """The calls ``actor`` may decide other than as the approver stored on them (a call
        escalated to its role, a policy's rule of its own), as a filter on ``ToolCall``: whoever
        may decide a call may see its run and thread (``api.permissions``)."""
        ...


def get_gate() -> ApprovalGate:
    """The configured approval gate."""
    gate: ApprovalGate = import_string(agent_settings().APPROVAL_GATE)()
    return gate
