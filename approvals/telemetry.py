"""The approval analytics as OpenTelemetry metrics, when tracing is on (``AGENT["TRACING"]``).

Observable gauges, read when the project's metric reader collects: time to decision (p50, p95)
by tool and by approver, pending calls by age, reject / expiry / edit rates and rubber stamps per
approver. They are the metrics page's numbers: the sweep's snapshot (``analytics.current``, over
the last ``ANALYTICS_WINDOW``) with the pending ages counted live, read once per collection for
every gauge; nothing before the sweep's first snapshot.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from agent_core.conf import agent_settings

from . import analytics

# A collection reads every gauge within this many seconds: they share one computation.
_FRESH_SECONDS = 5.0
_last: tuple[float, analytics.Analytics | None] | None = None


def install() -> None:
    """Register the gauges on the global meter provider (nothing when tracing is off)."""
    if agent_settings().TRACING:
        from opentelemetry import metrics

        register(metrics.get_meter("airlock.approvals"))


def register(meter: Any) -> None:
    """Register the approval analytics' gauges on ``meter`` (an OpenTelemetry ``Meter``)."""
    from opentelemetry.metrics import Observation

    def gauge(name: str, unit: str, read: Callable[[analytics.Analytics], Iterable[Any]]) -> None:
        def observe(options: Any) -> Iterable[Observation]:
            a = _current()
            if a is None:
                return []
            return [Observation(value, attributes) for value, attributes in read(a)]

        meter.create_observable_gauge(name, callbacks=[observe], unit=unit)

    gauge("airlock.approval.time_to_decision", "s", _latencies)
    gauge("airlock.approval.pending", "{call}", _ages)
    gauge("airlock.approval.rate", "1", _rates)
    gauge("airlock.approval.rubber_stamps", "{approval}", _stamps)


def _current() -> analytics.Analytics | None:
    global _last
    now = time.monotonic()
    if _last is None or now - _last[0] > _FRESH_SECONDS:
        _last = (now, analytics.current())
    return _last[1]


def _latencies(a: analytics.Analytics) -> Iterable[tuple[float, dict[str, str]]]:
    for by, rows in (("tool", a.by_tool), ("approver", a.by_approver)):
        for row in rows:
            yield row.p50, {f"airlock.{by}": row.key, "airlock.quantile": "p50"}
            yield row.p95, {f"airlock.{by}": row.key, "airlock.quantile": "p95"}


def _ages(a: analytics.Analytics) -> Iterable[tuple[int, dict[str, str]]]:
    for bucket, n in a.pending_ages.items():
        yield n, {"airlock.age": bucket}


def _rates(a: analytics.Analytics) -> Iterable[tuple[float, dict[str, str]]]:
    o = a.outcomes
    for outcome, rate in (
        ("rejected", o.rejection_rate),
        ("expired", o.expiry_rate),
        ("edited", o.edit_rate),
    ):
        if rate is not None:
            yield rate, {"airlock.outcome": outcome}


def _stamps(a: analytics.Analytics) -> Iterable[tuple[int, dict[str, str]]]:
    for stamp in a.rubber_stamps:
        yield stamp.fast, {"enduser.id": stamp.approver}
