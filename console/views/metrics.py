"""The metrics page: runs by status over time, failure rate, approval latency, rates per tool."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from .. import metrics
from ..access import console_view
from ..conf import console_settings
from .common import page


@console_view
def metrics_page(request: HttpRequest) -> HttpResponse:
    """Charts and numbers of the last ``METRICS_DAYS`` days."""
    days = console_settings().METRICS_DAYS
    return page(request, "console/metrics.html", {"m": metrics.compute(days), "days": days})
