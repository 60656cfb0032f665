"""The numbers of the metrics page, computed from the runs and calls of the last days."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from django.db.models import Count, F, Q
from django.db.models.functions import TruncDate
from django.utils import timezone

from agent_core import usage
from agent_core.choices import CallStatus, RunStatus
from agent_core.models import Run, ToolCall

# Decisions made by no person: they have no latency worth measuring.
_NOT_A_PERSON = ("", "policy", "remembered", "expiry")
STATUS_ORDER = (
    RunStatus.COMPLETED,
    RunStatus.FAILED,
    RunStatus.CANCELLED,
    RunStatus.WAITING,
    RunStatus.RUNNING,
    RunStatus.QUEUED,
    RunStatus.CANCELLING,
)


@dataclass(frozen=True)
class ToolRates:
    """How approval requests of one tool ended."""

    tool: str
    asked: int
    settled: int
    rejected: int
    expired: int

    @property
    def rejection_rate(self) -> float | None:
        return self.rejected / self.settled if self.settled else None

    @property
    def expiry_rate(self) -> float | None:
        return self.expired / self.settled if self.settled else None


@dataclass(frozen=True)
class Metrics:
    """Everything the metrics page shows."""

    since: datetime
    days: list[date]
    runs_by_day: dict[date, dict[str, int]]
    totals: dict[str, int]
    failure_rate: float | None
    latency_median: timedelta | None
    latency_p95: timedelta | None
    decisions: int
    tools: list[ToolRates]
    in_doubt: int
    chart: dict[str, Any] = field(default_factory=dict)
    usage: list[dict[str, Any]] = field(default_factory=list)  # model tokens per actor, agent


def percentile(values: list[float], p: float) -> float | None:
    """The nearest-rank percentile ``p`` (0-100) of ``values``."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def compute(days: int) -> Metrics:
    """The metrics of the last ``days`` days (today included)."""
    today = timezone.localdate()
    day_list = [today - timedelta(days=n) for n in range(days - 1, -1, -1)]
    since = timezone.make_aware(datetime.combine(day_list[0], datetime.min.time()))
    runs_by_day: dict[date, dict[str, int]] = {d: {} for d in day_list}
    rows = (
        Run.objects.filter(created_at__gte=since)
        .annotate(day=TruncDate("created_at"))
        .values("day", "status")
        .annotate(n=Count("id"))
    )
    totals: dict[str, int] = {}
    for row in rows:
        runs_by_day.setdefault(row["day"], {})[row["status"]] = row["n"]
        totals[row["status"]] = totals.get(row["status"], 0) + row["n"]
    ended = totals.get(RunStatus.COMPLETED, 0) + totals.get(RunStatus.FAILED, 0)
    latencies = [
        (decided - requested).total_seconds()
        for requested, decided in ToolCall.objects.filter(
            requested_at__gte=since, requires_approval=True, decided_at__isnull=False
        )
        .exclude(decided_via__in=_NOT_A_PERSON)
        .values_list("requested_at", "decided_at")
        if decided is not None
    ]
    median, p95 = percentile(latencies, 50), percentile(latencies, 95)
    return Metrics(
        since=since,
        days=day_list,
        runs_by_day=runs_by_day,
        totals=totals,
        failure_rate=totals.get(RunStatus.FAILED, 0) / ended if ended else None,
        latency_median=timedelta(seconds=median) if median is not None else None,
        latency_p95=timedelta(seconds=p95) if p95 is not None else None,
        decisions=len(latencies),
        tools=_tool_rates(since),
        in_doubt=ToolCall.objects.filter(status=CallStatus.IN_DOUBT).count(),
        chart=_stacked_bars(day_list, runs_by_day),
        usage=usage.by_actor_and_agent(since=since),
    )


def _tool_rates(since: datetime) -> list[ToolRates]:
    rows = (
        ToolCall.objects.filter(requested_at__gte=since, requires_approval=True)
        .exclude(decided_via__in=("policy", "remembered"))
        .values("tool_name")
        .annotate(
            asked=Count("id"),
            settled=Count("id", filter=Q(decided_at__isnull=False) | Q(status=CallStatus.FAILED)),
            rejected=Count("id", filter=Q(status=CallStatus.REJECTED)),
            expired=Count("id", filter=Q(status=CallStatus.EXPIRED)),
        )
        .order_by(F("asked").desc(), "tool_name")
    )
    return [
        ToolRates(
            tool=r["tool_name"],
            asked=r["asked"],
            settled=r["settled"],
            rejected=r["rejected"],
            expired=r["expired"],
        )
        for r in rows
    ]


# The chart: one stacked bar a day, drawn as inline SVG (no script, no library).
CHART_W, CHART_H, CHART_PAD = 640, 200, 24


def _stacked_bars(days: list[date], by_day: dict[date, dict[str, int]]) -> dict[str, Any]:
    peak = max((sum(counts.values()) for counts in by_day.values()), default=0) or 1
    slot = (CHART_W - CHART_PAD) / len(days)
    bar = max(4.0, slot * 0.7)
    scale = (CHART_H - CHART_PAD) / peak
    bars = []
    for i, day in enumerate(days):
        x = CHART_PAD + i * slot + (slot - bar) / 2
        y = float(CHART_H - CHART_PAD)
        segments = []
        for status in STATUS_ORDER:
            n = by_day.get(day, {}).get(status, 0)
            if n:
                h = n * scale
                y -= h
                segments.append({"status": status, "n": n, "y": y, "h": h})
        bars.append(
            {
                "day": day,
                "x": x,
                "w": bar,
                "segments": segments,
                "label": i % max(1, len(days) // 7) == 0,
            }
        )
    return {
        "width": CHART_W,
        "height": CHART_H,
        "base": CHART_H - CHART_PAD,
        "peak": peak,
        "bars": bars,
        "statuses": STATUS_ORDER,
    }
