"""The audit: every decision and decision attempt, filterable, exportable as CSV."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from typing import Any

from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse

from approvals.models import DecisionAttempt
from approvals.selectors import visible_attempts

from ..access import console_view
from ..filters import AuditFilter, filtered, newest_first
from ..people import name_of
from .common import actor_of, page

CSV_COLUMNS = (
    "created_at",
    "actor_ref",
    "actor",
    "action",
    "outcome",
    "via",
    "tool_name",
    "tool_call_id",
    "run_id",
    "thread_id",
    "detail",
)


def _attempts(request: HttpRequest) -> AuditFilter:
    return AuditFilter(request.GET, queryset=visible_attempts(actor_of(request)))


@console_view
def audit(request: HttpRequest) -> HttpResponse:
    """The audit log, newest first."""
    filters = _attempts(request)
    listed = newest_first(filtered(filters), request)
    return page(request, "console/audit.html", {**listed, "filter_form": filters.form})


# A spreadsheet reads a cell starting with one of these as a formula (OWASP "CSV Injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def cell(value: str) -> str:
    """``value`` as a CSV cell a spreadsheet shows as text: a leading ``'`` where it would
    otherwise read a formula (a reject reason ``=HYPERLINK(…)`` is typed by anyone)."""
    return f"'{value}" if value.startswith(FORMULA_STARTS) else value


class _Echo:
    """A file-like object whose ``write`` returns the line, for streaming ``csv.writer``."""

    def write(self, value: str) -> str:
        return value


def _rows(qs: QuerySet[DecisionAttempt]) -> Iterator[Any]:
    writer = csv.writer(_Echo())
    yield writer.writerow(CSV_COLUMNS)
    names: dict[str, str] = {}
    for attempt in qs.iterator():
        if attempt.actor_ref not in names:
            names[attempt.actor_ref] = name_of(attempt.actor_ref)
        yield writer.writerow(
            cell(value)
            for value in [
                attempt.created_at.isoformat(),
                attempt.actor_ref,
                names[attempt.actor_ref],
                attempt.action,
                attempt.outcome,
                attempt.via,
                attempt.tool_name,
                attempt.tool_call_id,
                attempt.run_id,
                attempt.thread_id,
                attempt.detail,
            ]
        )


@console_view
def audit_csv(request: HttpRequest) -> StreamingHttpResponse:
    """The filtered audit as CSV, every matching row (not one page)."""
    qs = filtered(_attempts(request)).order_by("-created_at", "-id")
    response = StreamingHttpResponse(_rows(qs), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="airlock-audit.csv"'
    return response
