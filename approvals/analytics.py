"""Approval analytics (SPEC §19): time to decision by tool and approver, the ages of what waits,
expiry / reject / edit rates, and approvals given faster than ``RUBBER_STAMP_SECONDS``.

Each number is one named statement (``approvals.sql``), computed by PostgreSQL
(``percentile_cont``, ``FILTER``, ``GROUPING SETS``): nothing is read row by row into Python.
Over a million calls those scans take seconds, so nothing a person waits for runs them: the
sweep recomputes a snapshot (``refresh_due``, every ``ANALYTICS_REFRESH``, over the last
``ANALYTICS_WINDOW``) and the console's metrics page and ``approvals.telemetry``'s
OpenTelemetry gauges read it (``current``). Only the pending calls' ages are counted live: they
come from the partial index on pending calls, a few milliseconds.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from agent_core.engine import rows
from agent_core.engine import sql as core_sql

from . import sql
from .conf import approvals_settings
from .models import AnalyticsSnapshot

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
class Outcomes:
    """How the requests asked of a person ended, of one tool or of all (``tool`` ``"*"``)."""

    tool: str
    asked: int
    settled: int
    rejected: int
    expired: int
    edited: int

    def rate(self, count: int) -> float | None:
        return count / self.settled if self.settled else None

    @property
    def rejection_rate(self) -> float | None:
        return self.rate(self.rejected)

    @property
    def expiry_rate(self) -> float | None:
        return self.rate(self.expired)

    @property
    def edit_rate(self) -> float | None:
        return self.rate(self.edited)


@dataclass(frozen=True)
class Analytics:
    """Everything the approval analytics show: the requests made since ``since``, counted at
    ``as_of`` (the pending ages: at the moment they were read)."""

    since: datetime
    as_of: datetime
    overall: Latency | None  # of every decision by a person (key "*"); None: there was none
    by_tool: list[Latency]
    by_approver: list[Latency]
    outcomes: Outcomes  # of all the requests
    tools: list[Outcomes]  # by tool, most asked first
    pending_ages: dict[str, int]
    rubber_stamps: list[RubberStamp]
    rubber_stamp_seconds: float


ALL = "*"


def compute(since: datetime) -> Analytics:
    """The approval analytics of the requests made since ``since``, computed now (ages: of what
    waits now): the scans the snapshot saves the page."""
    as_of = timezone.now()
    seconds = approvals_settings().RUBBER_STAMP_SECONDS
    overall: Latency | None = None
    by_tool: list[Latency] = []
    by_approver: list[Latency] = []
    tools: list[Outcomes] = []
    with connection.cursor() as cursor:
        cursor.execute(sql.TIME_TO_DECISION, {"since": since})
        for tool, approver, n, p50, p95 in cursor.fetchall():
            if tool is None and approver is None:
                overall = Latency(ALL, n, float(p50), float(p95)) if n else None
            else:
                latency = Latency(tool if tool is not None else approver, n, float(p50), float(p95))
                (by_tool if tool is not None else by_approver).append(latency)
        cursor.execute(sql.DECISION_RATES, {"since": since})
        for tool, *counts in cursor.fetchall():
            tools.append(Outcomes(ALL if tool is None else tool, *counts))
        cursor.execute(sql.RUBBER_STAMPS, {"since": since, "seconds": seconds})
        stamps = [RubberStamp(*row) for row in cursor.fetchall()]
    [outcomes] = [o for o in tools if o.tool == ALL]
    return Analytics(
        since=since,
        as_of=as_of,
        overall=overall,
        by_tool=by_tool,
        by_approver=by_approver,
        outcomes=outcomes,
        tools=[o for o in tools if o.tool != ALL],
        pending_ages=pending_ages(),
        rubber_stamps=stamps,
        rubber_stamp_seconds=seconds,
    )


def pending_ages() -> dict[str, int]:
    """How many calls wait on an approval now, by age bucket (the pending calls' index)."""
    with connection.cursor() as cursor:
        cursor.execute(sql.PENDING_AGES, {"now": timezone.now()})
        return dict(zip(AGE_BUCKETS, cursor.fetchone(), strict=True))


def current() -> Analytics | None:
    """The last snapshot with the pending ages of now; ``None`` before the sweep's first one."""
    snapshot = AnalyticsSnapshot.objects.filter(pk=_SNAPSHOT).first()
    if snapshot is None:
        return None
    n = snapshot.numbers
    return Analytics(
        since=snapshot.since,
        as_of=snapshot.computed_at,
        overall=Latency(*n["overall"]) if n["overall"] else None,
        by_tool=[Latency(*row) for row in n["by_tool"]],
        by_approver=[Latency(*row) for row in n["by_approver"]],
        outcomes=Outcomes(*n["outcomes"]),
        tools=[Outcomes(*row) for row in n["tools"]],
        pending_ages=pending_ages(),
        rubber_stamps=[RubberStamp(*row) for row in n["rubber_stamps"]],
        rubber_stamp_seconds=n["rubber_stamp_seconds"],
    )


# The snapshot's one row, and the advisory lock its refresh holds (transaction-scoped).
_SNAPSHOT = 1
_REFRESHING = "airlock-approval-analytics"


def refresh_due() -> bool:
    """Recompute the snapshot when it is older than ``ANALYTICS_REFRESH`` (a sweep job); whether
    this call did.

    Several sweepers and beat processes run this: the first takes a transaction-scoped advisory
    lock without waiting, the others find it taken and go on with their sweep. The one holding
    it reads the snapshot's age again under the lock (a refresh that committed just before is
    seen: the lock is released after the commit is visible), so one refresh happens per
    interval, whatever the number of processes.
    """
    conf = approvals_settings()
    with transaction.atomic():
        locked = rows.fetch_one(core_sql.TRY_ADVISORY_LOCK, {"name": _REFRESHING})
        if locked is None or not locked[0]:
            return False
        last = (
            AnalyticsSnapshot.objects.filter(pk=_SNAPSHOT)
            .values_list("computed_at", flat=True)
            .first()
        )
        if last is not None and timezone.now() - last < conf.analytics_refresh:
            return False
        start = time.perf_counter()
        a = compute(timezone.now() - conf.analytics_window)
        AnalyticsSnapshot.objects.update_or_create(
            pk=_SNAPSHOT,
            defaults={
                "computed_at": a.as_of,
                "since": a.since,
                "took": time.perf_counter() - start,
                "numbers": _numbers(a),
            },
        )
    return True


def _numbers(a: Analytics) -> dict[str, Any]:
    # What the snapshot keeps: everything but the window, the time and the live pending ages.
    return {
        "overall": dataclasses.astuple(a.overall) if a.overall else None,
        "by_tool": [dataclasses.astuple(row) for row in a.by_tool],
        "by_approver": [dataclasses.astuple(row) for row in a.by_approver],
        "outcomes": dataclasses.astuple(a.outcomes),
        "tools": [dataclasses.astuple(row) for row in a.tools],
        "rubber_stamps": [dataclasses.astuple(row) for row in a.rubber_stamps],
        "rubber_stamp_seconds": a.rubber_stamp_seconds,
    }
