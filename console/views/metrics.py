"""The metrics page: runs by status over time, failure rate, approval latency, rates per tool."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from .. import metrics
from ..access import console_view
from ..conf import console_settings
from .common import actor_of, page


@console_view
def metrics_page(request: HttpRequest) -> HttpResponse:
    """Charts and numbers of the last ``METRICS_DAYS`` days; the approval analytics for the
    ``ANALYTICS_ROLES`` (and superusers), as the sweep's last snapshot has them."""
    settings = console_settings()
    m = metrics.compute(settings.METRICS_DAYS)
    context = {"m": m, "days": settings.METRICS_DAYS}
    roles = actor_of(request).roles
    if request.user.is_superuser or roles & set(settings.ANALYTICS_ROLES):
        context["analytics"] = True
        context["a"] = m.approvals
    return page(request, "console/metrics.html", context)
