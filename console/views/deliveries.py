"""Notification deliveries: what reached whom, through which channel, after how many tries."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse

from agent_core.access import is_operator, visible_calls
from agent_core.models import ToolCall
from approvals.models import Delivery

from ..access import console_view
from ..conf import console_settings
from ..forms import DeliveryFilterForm
from ..people import ref_of
from .common import actor_of, page


def _deliveries(request: HttpRequest) -> tuple[DeliveryFilterForm, QuerySet[Delivery]]:
    form = DeliveryFilterForm(request.GET)
    filters = form.cleaned_data if form.is_valid() else {}
    qs = Delivery.objects.select_related("tool_call").order_by("-created_at", "-id")
    actor = actor_of(request)
    if not is_operator(actor):
        # The audit's rule: deliveries about the calls the user sees, and those sent to them.
        calls: QuerySet[ToolCall] = visible_calls(actor)
        qs = qs.filter(Q(tool_call__in=calls.values("pk")) | Q(recipient_ref=actor.ref))
    if filters.get("recipient"):
        qs = qs.filter(recipient_ref=ref_of(filters["recipient"]))
    for field, column in (("status", "status"), ("channel", "channel"), ("call", "tool_call_id")):
        if filters.get(field):
            qs = qs.filter(**{column: filters[field]})
    return form, qs


@console_view
def deliveries(request: HttpRequest) -> HttpResponse:
    """Every notification delivery, newest first: sent, pending (retrying) or failed."""
    form, qs = _deliveries(request)
    paginator = Paginator(qs, console_settings().PAGE_SIZE)
    query = request.GET.copy()
    query.pop("page", None)
    return page(
        request,
        "console/deliveries.html",
        {
            "filter_form": form,
            "page_obj": paginator.get_page(request.GET.get("page")),
            "query": query.urlencode(),
        },
    )
