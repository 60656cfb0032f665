"""Approval analytics (SPEC §19): time to decision by tool and approver, the ages of what waits,
expiry / reject / edit rates, and approvals given faster than ``RUBBER_STAMP_SECONDS``.

Each number is one named statement (``approvals.sql``), computed by PostgreSQL
(``percentile_cont``, ``FILTER``, ``GROUPING SETS``): nothing is read row by row into Python.
The console's metrics page shows them; ``approvals.telemetry`` exports them as OpenTelemetry
metrics when tracing is on.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.utils import timezone

from . import sql
from .conf import approvals_settings

AGE_BUCKETS = ("under 5 min", "5 min to 1 h", "1 h to 1 day", "over 1 day")


@dataclass(frozen=True)
class Latency:
    """Time to decision of one tool's or one approver's requests (seconds)."""

    key: str
    decisions: int
    p50: float
    p95: float


@dataclass(frozen=True)
class RubberStamp:
    """An approver's approvals, and those given faster than ``RUBBER_STAMP_SECONDS``."""

    approver: str
    fast: int
    approvals: int


@dataclass(frozen=True)
class Analytics:
    """Everything the approval analytics show."""

    by_tool: list[Latency]
    by_approver: list[Latency]
    settled: int
    rejected: int
    expired: int
    edited: int
    pending_ages: dict[str, int]
    rubber_stamps: list[RubberStamp]
    rubber_stamp_seconds: float

    def rate(self, count: int) -> float | None:
        return count / self.settled if self.settled else None

    @property
    def reject_rate(self) -> float | None:
        return self.rate(self.rejected)

    @property
    def expiry_rate(self) -> float | None:
        return self.rate(self.expired)

    @property
    def edit_rate(self) -> float | None:
        return self.rate(self.edited)


def compute(since: datetime) -> Analytics:
    """The approval analytics of the requests made since ``since`` (ages: of what waits now)."""
    seconds = approvals_settings().RUBBER_STAMP_SECONDS
    by_tool: list[Latency] = []
    by_approver: list[Latency] = []
    with connection.cursor() as cursor:
        cursor.execute(sql.TIME_TO_DECISION, {"since": since})
        for tool, approver, n, p50, p95 in cursor.fetchall():
            latency = Latency(tool if tool is not None else approver, n, float(p50), float(p95))
            (by_tool if tool is not None else by_approver).append(latency)
        cursor.execute(sql.DECISION_RATES, {"since": since})
        settled, rejected, expired, edited = cursor.fetchone()
        cursor.execute(sql.PENDING_AGES, {"now": timezone.now()})
        ages = dict(zip(AGE_BUCKETS, cursor.fetchone(), strict=True))
        cursor.execute(sql.RUBBER_STAMPS, {"since": since, "seconds": seconds})
        stamps = [RubberStamp(*row) for row in cursor.fetchall()]
    return Analytics(
        by_tool=by_tool,
        by_approver=by_approver,
        settled=settled,
        rejected=rejected,
        expired=expired,
        edited=edited,
        pending_ages=ages,
        rubber_stamps=stamps,
        rubber_stamp_seconds=seconds,
    )
