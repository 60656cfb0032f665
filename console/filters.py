"""The console's lists filter with django-filter ``FilterSet``s (the REST API's own where the API
has the same list) and page with the API's one pagination class, ``KeysetPagination``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import django_filters
from django.core.exceptions import BadRequest
from django.db.models import Model, Q, QuerySet
from django.http import HttpRequest
from rest_framework.exceptions import ValidationError

from agent_core.api.filters import RunFilter
from agent_core.api.pagination import KeysetPagination, Page
from agent_core.choices import RunStatus
from agent_core.models import Run
from approvals.models import Action, DecisionAttempt, Delivery, DeliveryStatus

from .conf import console_settings
from .people import ref_of

M = TypeVar("M", bound=Model)


class ByPerson(django_filters.CharFilter):
    """A person given as a username or an actor ref, matched on the ref ``field_name``."""

    def __init__(self, field_name: str, label: str) -> None:
        super().__init__(
            field_name=field_name,
            max_length=200,
            label=label,
            help_text="a username or an actor ref",
        )

    def filter(self, qs: QuerySet[Any], value: str) -> QuerySet[Any]:
        return qs.filter(**{self.field_name: ref_of(value)}) if value else qs


class RunsFilter(RunFilter):
    """The API's ``RunFilter`` (status, agent, thread), one status at a time from a list, and
    the actor who started the run."""

    status = django_filters.ChoiceFilter(choices=RunStatus.choices, empty_label="Any status")
    actor = ByPerson("actor_ref", "Actor")
    # The API's parent-run and date bounds are for scripts; the page's form leaves them out
    # (``None`` drops a base's filter, as it drops a base's field in a Django form).
    parent_run = None
    created_after = None  # type: ignore[assignment]
    created_before = None  # type: ignore[assignment]

    class Meta:
        model = Run
        fields = ["status", "agent", "actor", "thread"]


class AuditFilter(django_filters.FilterSet):
    """The audit's filters (the page and its CSV export): combined with AND."""

    actor = ByPerson("actor_ref", "Actor")
    action = django_filters.ChoiceFilter(choices=Action.choices, empty_label="Any action")
    outcome = django_filters.CharFilter(max_length=32)
    via = django_filters.CharFilter(max_length=64)
    tool = django_filters.CharFilter(field_name="tool_name", max_length=100)
    call = django_filters.CharFilter(field_name="tool_call_id", max_length=40, label="Tool call id")

    class Meta:
        model = DecisionAttempt
        fields = ["actor", "action", "outcome", "via", "tool", "call"]


class DeliveryFilter(django_filters.FilterSet):
    """The notification deliveries' filters."""

    status = django_filters.ChoiceFilter(choices=DeliveryStatus.choices, empty_label="Any status")
    channel = django_filters.CharFilter(max_length=64)
    recipient = ByPerson("recipient_ref", "Recipient")
    call = django_filters.CharFilter(field_name="tool_call_id", max_length=40, label="Tool call id")

    class Meta:
        model = Delivery
        fields = ["status", "channel", "recipient", "call"]


def filtered(filters: django_filters.FilterSet) -> QuerySet[Any]:
    """The filtered rows; an invalid filter (an unknown status) is ignored, not an error."""
    qs: QuerySet[Any] = filters.qs if filters.is_valid() else filters.queryset
    return qs


def is_filtered(filters: django_filters.FilterSet) -> bool:
    """Whether a filter narrows the list."""
    return filters.is_valid() and any(filters.form.cleaned_data.values())


@contextmanager
def bad_request() -> Iterator[None]:
    """A cursor, sort or size the console never gave out is a 400, not an API error."""
    try:
        yield
    except ValidationError as exc:
        raise BadRequest(str(exc.detail)) from exc


def sort_of(pagination: KeysetPagination, params: Any) -> str:
    """The order ``params`` ask; one the console never offered is a 400."""
    with bad_request():
        return pagination.sort_of(params)


def paginate(
    pagination: KeysetPagination, queryset: QuerySet[M], params: Any, *, branches: Q | None = None
) -> Page[M]:
    """One page as ``params`` ask; a cursor, sort or size the console never gave out is a 400."""
    with bad_request():
        return pagination.paginate(queryset, params, branches=branches)


def newest_first(queryset: QuerySet[M], request: HttpRequest) -> dict[str, Any]:
    """A page of a newest-first list and the query strings of its links: ``query`` (the filters,
    without the cursor: the first page, and the CSV export) and ``next_query``."""
    pagination = KeysetPagination()
    pagination.page_size = console_settings().PAGE_SIZE
    results = paginate(pagination, queryset, request.GET)
    query = request.GET.copy()
    query.pop(pagination.cursor_query_param, None)
    following = query.copy()
    if results.next_cursor:
        following[pagination.cursor_query_param] = results.next_cursor
    return {"results": results, "query": query.urlencode(), "next_query": following.urlencode()}
