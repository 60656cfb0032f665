"""Filters, search and pagination of the pending inbox (``GET /agent/approvals/pending``, and the
console's inbox, which reuses both)."""

from __future__ import annotations

from decimal import Decimal

import django_filters
from django.db.models import Q, QuerySet, TextField
from django.db.models.functions import Cast

from agent_core.api.pagination import KeysetPagination, Ordering
from agent_core.models import ToolCall


class PendingFilter(django_filters.FilterSet):
    """``?tool=&agent=&approver=&thread=&requester=&q=``: combined with AND.

    ``q`` searches the tool's name, the call's summary, its confirmation text and its arguments.
    """

    tool = django_filters.CharFilter(field_name="tool_name", max_length=100, label="Tool")
    agent = django_filters.CharFilter(field_name="run__agent", max_length=100, label="Agent")
    approver = django_filters.CharFilter(field_name="approver", max_length=100, label="Approver")
    thread = django_filters.CharFilter(field_name="thread_id", max_length=40, label="Thread")
    requester = django_filters.CharFilter(
        field_name="requester_ref", max_length=200, label="Requester"
    )
    q = django_filters.CharFilter(method="search", max_length=200, label="Search")

    class Meta:
        model = ToolCall
        fields: list[str] = []

    def narrows(self) -> bool:
        """Whether any filter or the search narrows the list (invalid ones empty it)."""
        return not self.is_valid() or any(self.form.cleaned_data.values())

    def search(self, queryset: QuerySet[ToolCall], name: str, value: str) -> QuerySet[ToolCall]:
        return queryset.alias(args_text=Cast("args", TextField())).filter(
            Q(tool_name__icontains=value)
            | Q(summary__icontains=value)
            | Q(confirmation__icontains=value)
            | Q(args_text__icontains=value)
        )


class PendingPagination(KeysetPagination):
    """Oldest first by default; ``?sort=newest``, ``?sort=deadline`` (soonest first, calls
    without a deadline last) or ``?sort=amount`` (largest first, calls without one last);
    ``?limit=`` 1 to 200, default 50."""

    orderings = {
        "oldest": Ordering("requested_at"),
        "newest": Ordering("requested_at", descending=True),
        "deadline": Ordering("expires_at"),
        "amount": Ordering("amount", descending=True, parse=Decimal),
    }
    default_sort = "oldest"
    sort_query_param = "sort"
    page_size_query_param = "limit"
