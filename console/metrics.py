"""The numbers of the metrics page: the runs of the last days, counted when the page is asked for,
and the approvals' numbers from the sweep's snapshot (``approvals.analytics.current``), which
would take seconds to count at a million calls."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from django.db.models import Count
from django.db.models.functions import TruncDate
from django.utils import timezone

from agent_core.choices import CallStatus, RunStatus
from agent_core.engine import usage
from agent_core.models import Run, ToolCall
from approvals import analytics

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
class Metrics:
    """Everything the metrics page shows."""

    since: datetime
    days: list[date]
    runs_by_day: dict[date, dict[str, int]]
    totals: dict[str, int]
    failure_rate: float | None
    # The approval analytics' last snapshot (None before the sweep's first): its window and time
    # are its own, ``ANALYTICS_WINDOW`` as of ``approvals.as_of``.
    approvals: analytics.Analytics | None
    in_doubt: int
    chart: dict[str, Any] = field(default_factory=dict)
    usage: list[dict[str, Any]] = field(default_factory=list)  # model tokens per actor, agent

    @property
    def decisions(self) -> int:
        overall = self.approvals.overall if self.approvals else None
        return overall.decisions if overall else 0

    @property
    def latency_median(self) -> timedelta | None:
        overall = self.approvals.overall if self.approvals else None
        return timedelta(seconds=overall.p50) if overall else None

    @property
    def latency_p95(self) -> timedelta | None:
        overall = self.approvals.overall if self.approvals else None
        return timedelta(seconds=overall.p95) if overall else None

    @property
    def tools(self) -> list[analytics.Outcomes]:
        return self.approvals.tools if self.approvals else []


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
    return Metrics(
        since=since,
        days=day_list,
        runs_by_day=runs_by_day,
        totals=totals,
        failure_rate=totals.get(RunStatus.FAILED, 0) / ended if ended else None,
        approvals=analytics.current(),
        in_doubt=ToolCall.objects.filter(status=CallStatus.IN_DOUBT).count(),
        chart=_stacked_bars(day_list, runs_by_day),
        usage=usage.by_actor_and_agent(since=since),
    )


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
