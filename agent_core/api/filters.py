"""django-filter filters of the list endpoints."""

from __future__ import annotations

import django_filters

from ..models import Run, RunStatus, Thread


class RunFilter(django_filters.FilterSet):
    """``GET /agent/runs?status=waiting&agent=support&thread=thr_…&created_after=…``"""

    status = django_filters.MultipleChoiceFilter(choices=RunStatus.choices)
    agent = django_filters.CharFilter()
    thread = django_filters.CharFilter(field_name="thread_id")
    parent_run = django_filters.CharFilter(field_name="parent_run_id")
    created_after = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    created_before = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = Run
        fields = ["status", "agent", "thread", "parent_run", "created_after", "created_before"]


class ThreadFilter(django_filters.FilterSet):
    """``GET /agent/threads?agent=support``"""

    agent = django_filters.CharFilter()

    class Meta:
        model = Thread
        fields = ["agent"]
