"""The approval analytics at 1M calls (bench/README.md, "Approval analytics at 1M calls").

    DATABASE_URL=postgres://…/airlock_gov_bench PYTHONPATH=. python bench/approval_analytics.py

against the scratch database ``bench/simulate_calls.sql`` fills.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import django


def timed(work: Callable[[], Any], n: int) -> str:
    took = []
    for _ in range(n):
        start = time.perf_counter()
        work()
        took.append((time.perf_counter() - start) * 1000)
    return f"median {statistics.median(took):.0f} ms, min {min(took):.0f} ms over {n}"


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.dev")
    django.setup()
    from django.utils import timezone

    from approvals import analytics
    from console import metrics

    since = timezone.now() - timedelta(days=14)
    print("analytics.compute (14 days):", timed(lambda: analytics.compute(since), 5))
    print(
        "metrics.compute (14 days, the page's other numbers):",
        timed(lambda: metrics.compute(14), 3),
    )


if __name__ == "__main__":
    main()
