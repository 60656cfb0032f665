"""A policy's answer for one call: whether a person must say yes, who, and for how long."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from agent_core.models import REQUESTER

__all__ = ["REQUESTER", "Requirement"]


@dataclass(frozen=True)
class Requirement:
    """``required``: ask a person first; ``approver``: ``"requester"`` or a role name."""

    required: bool = True
    approver: str = REQUESTER
    ttl: timedelta | None = None
