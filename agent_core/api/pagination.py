"""One pagination for every list, the API's and the console's: a keyset cursor in a fixed order.

The envelope is ``{results, next_cursor, next}``: ``next_cursor`` (``None`` on the last page) is
the opaque position after the page's last row, ``next`` the same request with that cursor. The
position is ``(sort key, id)``, so a deep page costs what the first does and a row added or
removed meanwhile never shifts a page.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from django.db.models import F, Model, Q, QuerySet
from django.db.models.expressions import OrderBy
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import BasePagination
from rest_framework.request import Request
from rest_framework.response import Response

from ..gate import cases_of

M = TypeVar("M", bound=Model)
R = TypeVar("R")  # a page's row: a model instance, or a row tuple with ``pk`` and the sort key


@dataclass(frozen=True)
class Ordering:
    """A list's order: a field (nulls last where it may be null), then the primary key as the
    tie-break. ``parse`` reads the field's value back from a cursor (a datetime by default; an
    amount's is ``Decimal``)."""

    field: str
    descending: bool = False
    parse: Callable[[str], Any] = datetime.fromisoformat

    def nulls_last(self, model: type[Model]) -> bool:
        """Whether the order says where nulls go (last): only for a field of ``model`` that may
        be null. Without nulls the order is the same, and a descending ``NULLS LAST`` is not the
        order of an index walked backwards (nulls first there): PostgreSQL sorted every row of
        the list instead of stopping after the page (newest first, bench/README.md)."""
        return bool(model._meta.get_field(self.field).null)

    def order_by(self, model: type[Model]) -> tuple[OrderBy, OrderBy]:
        """The order of ``model``'s rows (``nulls_last``), then the primary key."""
        nulls = True if self.nulls_last(model) else None
        if self.descending:
            return F(self.field).desc(nulls_last=nulls), F("pk").desc()
        return F(self.field).asc(nulls_last=nulls), F("pk").asc()

    def after(self, value: Any, pk: str) -> Q:
        """The rows after the position ``(value, pk)`` in this order."""
        later = "lt" if self.descending else "gt"
        if value is None:  # among the nulls, at the end
            return Q(**{f"{self.field}__isnull": True, f"pk__{later}": pk})
        # The redundant bound lets PostgreSQL seek an index to the position instead of walking.
        bound = "lte" if self.descending else "gte"
        return Q(**{f"{self.field}__{bound}": value}) & (
            Q(**{f"{self.field}__{later}": value}) | Q(**{self.field: value, f"pk__{later}": pk})
        ) | Q(**{f"{self.field}__isnull": True})


@dataclass(frozen=True)
class Page(Generic[R]):
    """One page of rows and the cursor of the next (``None`` on the last page)."""

    rows: list[R]
    next_cursor: str | None
    sort: str


class KeysetPagination(BasePagination):
    """``?cursor=&<page_size_query_param>=&sort=``; ``orderings`` names the orders a list offers.

    A DRF pagination class (``pagination_class``), and the console's too (``paginate`` with the
    request's GET parameters).
    """

    orderings: dict[str, Ordering] = {"newest": Ordering("created_at", descending=True)}
    default_sort = "newest"
    sort_query_param: str | None = None  # None: the list has one order
    cursor_query_param = "cursor"
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200

    def paginate(self, queryset: QuerySet[M], params: Any, *, branches: Q | None = None) -> Page[M]:
        """One page of ``queryset`` as ``params`` ask, in one query (two with ``branches``).

        ``branches`` (say, a policy's ``decidable``) is usually an OR of a few cases; each case
        becomes its own ordered, limited branch of a ``UNION`` of ids, so that PostgreSQL walks
        one index per case and stops early; the page's rows are read by those ids.
        """
        return self.paginate_rows(
            queryset,
            params,
            lambda _keys, _ordering: list(self.page_queryset(queryset, params, branches=branches)),
            branches=branches,
        )

    def paginate_rows(
        self,
        queryset: QuerySet[M],
        params: Any,
        fetch: Callable[[QuerySet[M, dict[str, Any]], Ordering], list[R]],
        *,
        branches: Q | None = None,
    ) -> Page[R]:
        """``paginate`` with the rows read by ``fetch(keys, ordering)``: ``keys`` is the query of
        the page's ``(pk, sort key)`` pairs (``keys_queryset``), for a read that joins only the
        page's rows and builds no model instances."""
        sort = self.sort_of(params)
        limit = self.limit_of(params)
        if queryset.query.is_empty():  # ``none()``: say so without asking the database
            return Page([], None, sort)
        keys = self.keys_queryset(queryset, params, branches=branches)
        return self.page_of(fetch(keys, self.orderings[sort]), sort, limit)

    def page_of(self, rows: list[R], sort: str, limit: int) -> Page[R]:
        """The page of ``rows`` (``limit`` of them and one more if a next page exists)."""
        if len(rows) <= limit:
            return Page(rows, None, sort)
        return Page(rows[:limit], self.cursor_after(sort, rows[limit - 1]), sort)

    def page_queryset(
        self, queryset: QuerySet[M], params: Any, *, branches: Q | None = None
    ) -> QuerySet[M]:
        """The query of one page: its rows and one more (which says a next page exists)."""
        ordering = self.orderings[self.sort_of(params)]
        n = self.limit_of(params) + 1
        if branches is None:
            queryset = self._after_cursor(queryset, params)
        else:
            # Django cannot use an ordered UNION as an ``__in`` subquery: the page's keys are
            # read first, then its rows.
            keys = self.keys_queryset(queryset, params, branches=branches)
            pk = queryset.model._meta.pk.name
            queryset = queryset.filter(pk__in=[key[pk] for key in keys])
        return queryset.order_by(*ordering.order_by(queryset.model))[:n]

    def keys_queryset(
        self, queryset: QuerySet[M], params: Any, *, branches: Q | None = None
    ) -> QuerySet[M, dict[str, Any]]:
        """The ``(pk, sort key)`` pairs of one page's rows and one more, in the page's order."""
        ordering = self.orderings[self.sort_of(params)]
        n = self.limit_of(params) + 1
        order = ordering.order_by(queryset.model)
        pk = queryset.model._meta.pk
        after = self._after_cursor(queryset, params).select_related(None).order_by(*order)
        keys = after.values(pk.name, ordering.field)
        if branches is None:
            return keys[:n]
        # Each case of ``branches`` its own ordered, limited branch: one index walk per case.
        parts = [keys.filter(case)[:n] for case in cases_of(branches)]
        if len(parts) == 1:  # one case (a rule of its own): already ordered and limited
            return parts[0]
        return parts[0].union(*parts[1:]).order_by(*order)[:n]

    def _after_cursor(self, queryset: QuerySet[M], params: Any) -> QuerySet[M]:
        raw_cursor = params.get(self.cursor_query_param)
        if not raw_cursor:
            return queryset
        sort = self.sort_of(params)
        value, pk = self._decode(raw_cursor, sort)
        return queryset.filter(self.orderings[sort].after(value, pk))

    def cursor_after(self, sort: str, row: Any) -> str:
        """The cursor of the page that starts after ``row`` in the order ``sort``."""
        value = getattr(row, self.orderings[sort].field)
        if value is not None:
            value = value.isoformat() if isinstance(value, datetime) else str(value)
        raw = json.dumps([sort, value, str(row.pk)]).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    def sort_of(self, params: Any) -> str:
        sort = params.get(self.sort_query_param) if self.sort_query_param else None
        if not sort:
            return self.default_sort
        if sort not in self.orderings:
            choices = ", ".join(self.orderings)
            raise ValidationError({str(self.sort_query_param): [f"One of: {choices}."]})
        return str(sort)

    def limit_of(self, params: Any) -> int:
        raw = params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        try:
            limit = int(raw)
        except ValueError:
            limit = 0
        if not 1 <= limit <= self.max_page_size:
            raise ValidationError(
                {
                    self.page_size_query_param: [
                        f"Must be an integer from 1 to {self.max_page_size}."
                    ]
                }
            )
        return limit

    def next_url(self, request: Any, page: Page[Any]) -> str | None:
        """The same request with the next page's cursor (``None`` on the last page)."""
        if page.next_cursor is None:
            return None
        query = request.GET.copy()
        query[self.cursor_query_param] = page.next_cursor
        return str(request.build_absolute_uri(f"{request.path}?{query.urlencode()}"))

    def envelope(self, request: Any, page: Page[Any], results: Any) -> dict[str, Any]:
        """``{results, next_cursor, next}``: every list's answer."""
        return {
            "results": results,
            "next_cursor": page.next_cursor,
            "next": self.next_url(request, page),
        }

    # --- DRF's pagination interface ---------------------------------------------------------

    def paginate_queryset(  # type: ignore[override]  # querysets only: the cursor filters them
        self, queryset: QuerySet[M], request: Request, view: Any = None
    ) -> list[M]:
        self.request = request
        self.page: Page[M] = self.paginate(queryset, request.query_params)
        return self.page.rows

    def get_paginated_response(self, data: Any) -> Response:
        return Response(self.envelope(self.request, self.page, data))

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "object",
            "required": ["results", "next_cursor", "next"],
            "properties": {
                "results": schema,
                "next_cursor": {"type": "string", "nullable": True},
                "next": {"type": "string", "format": "uri", "nullable": True},
            },
        }

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        params = [
            {
                "name": self.cursor_query_param,
                "required": False,
                "in": "query",
                "schema": {"type": "string"},
            },
            {
                "name": self.page_size_query_param,
                "required": False,
                "in": "query",
                "description": f"1 to {self.max_page_size}, default {self.page_size}",
                "schema": {"type": "integer", "minimum": 1, "maximum": self.max_page_size},
            },
        ]
        if self.sort_query_param:
            params.append(
                {
                    "name": self.sort_query_param,
                    "required": False,
                    "in": "query",
                    "schema": {"type": "string", "enum": list(self.orderings)},
                }
            )
        return params

    # --- the cursor ---------------------------------------------------------------------------

    def _decode(self, cursor: str, sort: str) -> tuple[Any, str]:
        try:
            padded = cursor + "=" * (-len(cursor) % 4)
            given, at, pk = json.loads(base64.urlsafe_b64decode(padded.encode()))
            if given != sort:
                raise ValueError("a cursor of another order")
            parse = self.orderings[sort].parse
            return (parse(at) if at is not None else None), str(pk)
        except (ValueError, TypeError, ArithmeticError, binascii.Error, UnicodeDecodeError) as exc:
            raise ValidationError(
                {self.cursor_query_param: ["Not a cursor this API gave out."]}
            ) from exc
