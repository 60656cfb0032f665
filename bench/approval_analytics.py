"""The approval analytics at 1M calls (bench/README.md, "Approval analytics at 1M calls").

    DATABASE_URL=postgres://…/airlock_gov_bench PYTHONPATH=. python bench/approval_analytics.py

against the scratch database ``bench/simulate_calls.sql`` fills. Measured:

- ``analytics.refresh_due``: the sweep's refresh of the snapshot (the live scans, then one row
  written), with the snapshot deleted first so that it is due;
- ``analytics.current``: what the page and the OpenTelemetry gauges read (the snapshot's row and
  the pending ages, counted live);
- ``console.metrics.compute``: the page's numbers (its runs counted, the approvals' from the
  snapshot);
- ``GET /console/metrics/`` in process (Django's test client, an operator logged in, so the
  approval analytics panel is rendered): the whole page.
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
    from django.contrib.auth.models import Group, User
    from django.test import Client
    from django.urls import reverse

    from approvals import analytics
    from approvals.models import AnalyticsSnapshot
    from console import metrics

    def refresh() -> None:
        AnalyticsSnapshot.objects.all().delete()
        assert analytics.refresh_due()

    print("analytics.refresh_due (the sweep, 14 days):", timed(refresh, 3))
    print("analytics.current (snapshot + live pending ages):", timed(analytics.current, 50))
    print("metrics.compute (the page's numbers):", timed(lambda: metrics.compute(14), 20))
    otto, _ = User.objects.get_or_create(username="bench-otto")
    otto.groups.add(Group.objects.get_or_create(name="operator")[0])
    client = Client(SERVER_NAME="localhost")  # an ALLOWED_HOSTS name
    client.force_login(otto)
    url = reverse("console:metrics")

    def page() -> None:
        response = client.get(url)
        assert response.status_code == 200 and b"data-as-of" in response.content

    print("GET /console/metrics/ (an operator: with the analytics panel):", timed(page, 30))


if __name__ == "__main__":
    main()
