"""django-filter filters of the list endpoints."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import django_filters
from django import forms
from django_filters.fields import IsoDateTimeField

from ..choices import RunStatus
from ..models import Run, Thread

# Real UTC offsets lie within ±14 h; PostgreSQL refuses beyond ±15:59, which must be a 400.
_MAX_OFFSET = timedelta(hours=14)


class _RealIsoDateTimeField(IsoDateTimeField):
    def to_python(self, value: Any) -> datetime | None:
        parsed: datetime | None = super().to_python(value)
        offset = parsed.utcoffset() if parsed is not None else None
        if offset is not None and abs(offset) > _MAX_OFFSET:
            raise forms.ValidationError("The UTC offset is out of range.", code="invalid")
        return parsed


class _IsoDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = _RealIsoDateTimeField


class RunFilter(django_filters.FilterSet):
    """``GET /agent/runs?status=waiting&agent=support&thread=thr_…&created_after=…``"""

    status = django_filters.MultipleChoiceFilter(choices=RunStatus.choices)
    agent = django_filters.CharFilter()
    thread = django_filters.CharFilter(field_name="thread_id")
    parent_run = django_filters.CharFilter(field_name="parent_run_id")
    created_after = _IsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    created_before = _IsoDateTimeFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = Run
        fields = ["status", "agent", "thread", "parent_run", "created_after", "created_before"]


class ThreadFilter(django_filters.FilterSet):
    """``GET /agent/threads?agent=support``"""

    agent = django_filters.CharFilter()

    class Meta:
        model = Thread
        fields = ["agent"]
