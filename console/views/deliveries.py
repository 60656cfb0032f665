"""Notification deliveries: what reached whom, through which channel, after how many tries."""

from __future__ import annotations

from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse

from agent_core.engine.access import is_operator, visible_calls
from agent_core.models import ToolCall
from approvals.models import Delivery

from ..access import console_view
from ..filters import DeliveryFilter, filtered, newest_first
from .common import actor_of, page


def _deliveries(request: HttpRequest) -> DeliveryFilter:
    qs = Delivery.objects.select_related("tool_call")
    actor = actor_of(request)
    if not is_operator(actor):
        # The audit's rule: deliveries about the calls the user sees, and those sent to them.
        calls: QuerySet[ToolCall] = visible_calls(actor)
        qs = qs.filter(Q(tool_call__in=calls.values("pk")) | Q(recipient_ref=actor.ref))
    return DeliveryFilter(request.GET, queryset=qs)


@console_view
def deliveries(request: HttpRequest) -> HttpResponse:
    """Every notification delivery, newest first: sent, pending (retrying) or failed."""
    filters = _deliveries(request)
    listed = newest_first(filtered(filters), request)
    return page(request, "console/deliveries.html", {**listed, "filter_form": filters.form})
