"""Filters and the keyset cursor of ``GET /agent/approvals/pending``."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import django_filters
from django.db.models import Q, QuerySet
from django.db.models.expressions import RawSQL
from rest_framework.exceptions import ValidationError

from agent_core.models import ToolCall

DEFAULT_LIMIT = 50
MAX_LIMIT = 200


class PendingFilter(django_filters.FilterSet):
    """``?tool=&agent=&approver=&thread=``: exact matches, combined with AND."""

    tool = django_filters.CharFilter(field_name="tool_name", max_length=100)
    agent = django_filters.CharFilter(field_name="run__agent", max_length=100)
    approver = django_filters.CharFilter(field_name="approver", max_length=100)
    thread = django_filters.CharFilter(field_name="thread_id", max_length=40)

    class Meta:
        model = ToolCall
        fields: list[str] = []


@dataclass(frozen=True)
class Cursor:
    """The position after the last call of a page: ``(requested_at, id)``, the list's order."""

    requested_at: datetime
    id: str

    def encode(self) -> str:
        raw = json.dumps([self.requested_at.isoformat(), self.id]).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, value: str) -> Cursor:
        try:
            padded = value + "=" * (-len(value) % 4)
            at, call_id = json.loads(base64.urlsafe_b64decode(padded.encode()))
            return cls(datetime.fromisoformat(at), str(call_id))
        except (ValueError, TypeError, binascii.Error, UnicodeDecodeError) as exc:
            raise ValidationError({"cursor": ["Not a cursor this API gave out."]}) from exc

    def after(self) -> Q:
        # The redundant ``>=`` lets PostgreSQL seek the index to the cursor instead of walking.
        return Q(requested_at__gte=self.requested_at) & (
            Q(requested_at__gt=self.requested_at)
            | Q(requested_at=self.requested_at, id__gt=self.id)
        )


def page_limit(params: Any) -> int:
    """``?limit=`` (1 to 200, default 50)."""
    raw = params.get("limit")
    if raw is None:
        return DEFAULT_LIMIT
    try:
        limit = int(raw)
    except ValueError:
        limit = 0
    if not 1 <= limit <= MAX_LIMIT:
        raise ValidationError({"limit": [f"Must be an integer from 1 to {MAX_LIMIT}."]})
    return limit


def page_query(
    queryset: QuerySet[ToolCall], who: Q, cursor: str | None, limit: int
) -> QuerySet[ToolCall]:
    """``limit + 1`` rows of ``queryset`` filtered by ``who`` after ``cursor``, as one query.

    ``who`` (the policy's ``decidable``) is usually an OR of a few cases; each case becomes its own
    ordered, limited branch of a ``UNION`` of call ids, so that PostgreSQL walks one index per
    case and stops early; the run and thread are joined only to the page's rows.
    """
    if cursor:
        queryset = queryset.filter(Cursor.decode(cursor).after())
    cases = who.children if who.connector == Q.OR and not who.negated else [who]
    order = ("requested_at", "id")
    ids = queryset.select_related(None).order_by(*order).values("id", "requested_at")
    branches = [ids.filter(_as_q(case))[: limit + 1] for case in cases]
    combined = branches[0].union(*branches[1:]) if len(branches) > 1 else branches[0]
    sql, params = combined.order_by(*order)[: limit + 1].query.sql_with_params()
    # Django cannot use an ordered UNION as an ``__in`` subquery; the SQL it compiled can.
    page = RawSQL(f"SELECT page.id FROM ({sql}) AS page", params)
    return queryset.filter(id__in=page).order_by(*order)


def keyset_page(
    queryset: QuerySet[ToolCall], who: Q, cursor: str | None, limit: int
) -> tuple[list[ToolCall], str | None]:
    """One page and the cursor of the next (``None`` on the last page), in one query."""
    rows = list(page_query(queryset, who, cursor, limit))
    if len(rows) <= limit:
        return rows, None
    last = rows[limit - 1]
    return rows[:limit], Cursor(last.requested_at, last.id).encode()


def _as_q(case: Any) -> Q:
    return case if isinstance(case, Q) else Q(case)
