"""A policy's answer for one call: whether a person must say yes, who, and for how long."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from agent_core.approvers import ROLE_SEPARATOR
from agent_core.choices import REQUESTER

__all__ = ["REQUESTER", "ROLE_SEPARATOR", "Escalate", "Requirement", "approver_roles"]


@dataclass(frozen=True)
class Escalate:
    """If the call still waits ``before`` its deadline, tell ``role`` (and, with ``may_decide``,
    let its holders decide too)."""

    role: str
    before: timedelta
    may_decide: bool = False


@dataclass(frozen=True)
class Requirement:
    """``required``: ask a person first; ``approver``: ``"requester"``, a role name, or several
    role names (a tuple: a holder of any of them may approve); ``ttl``: how long the request lasts.

    ``quorum`` asks for that many distinct approvers (the two-person rule is ``quorum=2``); the
    requester never counts as one of them unless ``requester_counts``.
    """

    required: bool = True
    approver: str | tuple[str, ...] = REQUESTER
    ttl: timedelta | None = None
    quorum: int = 1
    requester_counts: bool = False
    escalate: Escalate | None = None

    def __post_init__(self) -> None:
        roles = self.roles
        if not roles or any(not isinstance(r, str) or not r or ROLE_SEPARATOR in r for r in roles):
            raise ValueError(f"approver must be 'requester' or role names, not {self.approver!r}")
        if len(roles) > 1 and REQUESTER in roles:
            raise ValueError("'requester' cannot be one of several approver roles")
        if not isinstance(self.quorum, int) or isinstance(self.quorum, bool) or self.quorum < 1:
            raise ValueError(f"quorum must be a positive integer, not {self.quorum!r}")
        if self.quorum > 1 and roles == (REQUESTER,):
            raise ValueError("a quorum needs approver roles: the requester is one person")
        if self.escalate is not None:
            self._check_escalation(self.escalate)

    def _check_escalation(self, escalate: Escalate) -> None:
        if not escalate.role or ROLE_SEPARATOR in escalate.role or escalate.role == REQUESTER:
            raise ValueError(f"escalate to a role name, not {escalate.role!r}")
        if self.ttl is None:
            raise ValueError("an escalation needs a ttl: it happens some time before the deadline")
        if not timedelta(0) < escalate.before < self.ttl:
            raise ValueError("an escalation's 'before' must be positive and shorter than the ttl")

    @property
    def roles(self) -> tuple[str, ...]:
        """The approver as a tuple of role names (or ``("requester",)``)."""
        return (self.approver,) if isinstance(self.approver, str) else tuple(self.approver)

    @property
    def stored_approver(self) -> str:
        """The approver as the call stores it: one name, or sorted roles joined by ``|``."""
        return ROLE_SEPARATOR.join(sorted(set(self.roles)))


def approver_roles(approver: str) -> frozenset[str]:
    """The role names of a call's stored ``approver``."""
    return frozenset(approver.split(ROLE_SEPARATOR)) if approver else frozenset()
