"""The approval analytics at 1M calls (bench/README.md, "Approval analytics at 1M calls").

    DATABASE_URL=postgres://…/airlock_gov_bench PYTHONPATH=. python bench/approval_analytics.py

against the scratch database ``bench/simulate_calls.sql`` fills. Measured:

- ``analytics.refresh_due``: the sweep's refresh of the snapshot (the live scans, then one row
  written), with the snapshot deleted first so that it is due;
- ``analytics.current``: what the page and the OpenTelemetry gauges read (the snapshot's row and
  the pending ages, counted live);
- the metrics page's template rendered with that (``console/metrics.html``), the page's other
  numbers (``console.metrics.compute``) computed once beforehand and timed apart.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import django


def timed(work: Callable[[], Any], n: int) -> str:
    took = []
    for _ in range(n):
        start = time.perf_counter()
        work()
        took.append((time.perf_counter() - start) * 1000)
    return f"median {statistics.median(took):.1f} ms, min {min(took):.1f} ms over {n}"


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.dev")
    django.setup()
    from django.template.loader import render_to_string
    from django.test import RequestFactory

    from approvals import analytics
    from approvals.models import AnalyticsSnapshot
    from console import metrics

    def refresh() -> None:
        AnalyticsSnapshot.objects.all().delete()
        assert analytics.refresh_due()

    print("analytics.refresh_due (the sweep, 14 days):", timed(refresh, 3))
    print("analytics.current (snapshot + live pending ages):", timed(analytics.current, 50))
    start = time.perf_counter()
    m = metrics.compute(14)
    print(f"metrics.compute (the page's other numbers, once): {time.perf_counter() - start:.1f} s")
    request = RequestFactory().get("/console/metrics/")

    def page() -> None:
        context = {"m": m, "days": 14, "analytics": True, "a": analytics.current()}
        render_to_string("console/metrics.html", context, request=request)

    print("the page's template with analytics.current:", timed(page, 30))


if __name__ == "__main__":
    main()
