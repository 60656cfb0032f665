"""The pending inbox as row tuples: one page in one query, no model instance per row.

The REST API (``GET /agent/approvals/pending``) and the console's inbox read their pages here:
the ORM selects the page's keys (filters, cursor, the policy's ``decidable`` as a ``UNION`` of
one ordered, limited branch per case), and ``sql.PENDING_ROWS`` reads exactly the columns a page
shows for those rows only. An unfiltered first page with the default policy is one named
statement, keys and rows (``sql.DECIDABLE_PAGES``, ``selectors.first_page``).
"""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from functools import reduce
from operator import or_
from typing import Any, NamedTuple

from django.db import connection
from django.db.models import Q, QuerySet

from agent_core.api.pagination import KeysetPagination, Page
from agent_core.choices import CallStatus
from agent_core.gate import cases_of
from agent_core.models import ToolCall

from . import sql

WAITING = (CallStatus.PENDING_APPROVAL, CallStatus.PENDING_INPUT)
"""The statuses of a call waiting on a person: the inbox's calls."""


class PendingRow(NamedTuple):
    """One call waiting on a person, as the inbox shows it (``sql.PENDING_ROWS``' columns)."""

    id: str
    status: str
    tool_name: str
    kind: str
    args: dict[str, Any]
    confirmation: str
    summary: str
    approver: str
    requester_ref: str
    thread_id: str
    run_id: str
    agent: str
    parent_run_id: str | None
    requested_at: datetime
    expires_at: datetime | None
    approvals_needed: int
    approved_by: list[str] | None  # only for a call that needs several approvals
    approved_at: list[datetime] | None
    escalated_to: str | None
    amount: Decimal | None  # the tool's number for it (``@tool(amount=)``)
    duplicates: str | None  # the oldest pending call of the same tool and args, if older

    @property
    def pk(self) -> str:
        return self.id

    @property
    def approvals(self) -> list[tuple[str, datetime]]:
        """The approvals given since the call last started waiting: ``(by, at)``, oldest first."""
        return list(zip(self.approved_by or (), self.approved_at or (), strict=True))


def page(
    calls: QuerySet[ToolCall],
    params: Any,
    pagination: KeysetPagination,
    *,
    branches: Q | None = None,
) -> Page[PendingRow]:
    """The page of ``calls`` ``params`` ask for (see ``KeysetPagination.paginate``), as rows: the
    page's keys as the ORM selects them, then their rows."""
    return pagination.paginate_rows(
        calls, params, lambda keys, _: rows([key["id"] for key in keys]), branches=branches
    )


def rows(ids: list[str]) -> list[PendingRow]:
    """The rows of the calls ``ids`` (those that exist), in that order (``sql.PENDING_ROWS``)."""
    return read(sql.PENDING_ROWS, {"ids": ids}) if ids else []


def first_rows(statement: str, n: int, values: dict[str, Any]) -> list[PendingRow]:
    """The first ``n`` rows a named first page selects (``statement``: one of
    ``sql.DECIDABLE_PAGES`` or another in the same shape, for the page's order) for the actor
    (``values``: its ``cases.parameters``)."""
    return read(statement, {**values, "n": n})


def read(statement: str, params: dict[str, Any]) -> list[PendingRow]:
    """The rows the named ``statement`` (``sql.PENDING_ROWS``' columns) reads with ``params``."""
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        names = [column.name for column in cursor.description]
        found = cursor.fetchall()
    made = []
    for row in found:
        values = dict(zip(names, row, strict=True))
        # Django reads jsonb as text (its JSONField decodes it); so does this raw read.
        values["args"] = json.loads(values["args"])
        made.append(PendingRow(**values))
    return made


def waiting(case: Q) -> Q:
    """``case`` restricted to waiting calls, naming the status once: a case that already asks
    for one waiting status is left as it is, any other gets ``status IN WAITING``.

    PostgreSQL takes ``status IN (both) AND status = 'pending_approval'`` as two independent
    filters and multiplies their selectivities: it then expects about 2 of a requester's 2,000
    pending calls and reads and sorts them all instead of walking ``call_pending_by_requester``
    in order and stopping after one page (bench/README.md, "the requester's first page").
    """
    names = [
        child[1]
        for child in case.children
        if isinstance(child, tuple) and child[0] in ("status", "status__exact")
    ]
    if case.connector == Q.AND and not case.negated and any(name in WAITING for name in names):
        return case
    return case & Q(status__in=WAITING)


def count(calls: QuerySet[ToolCall], branches: Q) -> int:
    """How many of ``calls`` ``branches`` selects, as one ``UNION ALL`` of one index walk per
    case, each without the rows of the cases before it: no scan of every pending call tested
    against the whole ``OR``, and no de-duplication of the ids."""
    cases = cases_of(branches)
    ids = calls.select_related(None).order_by().values("pk")
    parts = [ids.filter(case) for case in cases[:1]]
    parts += [ids.filter(case).exclude(reduce(or_, cases[:i])) for i, case in enumerate(cases) if i]
    return (parts[0].union(*parts[1:], all=True) if len(parts) > 1 else parts[0]).count()
