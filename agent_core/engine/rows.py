"""Running the core's named statements (``sql``) and making model instances of their rows:
``rows.fetch_rows(sql.TRANSCRIPT, {"thread_id": …})`` runs a statement that ``sql`` names.

Each runs on Django's own cursor (``connection.cursor()``), bound as the project binds every
query: set ``DATABASES["default"]["OPTIONS"] = {"server_side_binding": True,
"prepare_threshold": 1}`` and psycopg sends the parameters apart from the statement and prepares
each statement the second time a connection runs it, so PostgreSQL parses and plans it once per
connection (``docs/howto/prepared-statements.md``)."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, models
from django.db.models import Model, signals
from django.db.models.base import ModelState

# A statement's parameters: named (``%(name)s``, a mapping) or, in order, a sequence.
Params = Sequence[Any] | Mapping[str, Any]


def json_rows(rows: Sequence[Model]) -> str:
    """New model instances as a JSON array of their columns, for ``insert_rows``: stamped first
    as the ORM stamps an insert (``auto_now_add``…), then marked stored, as ``bulk_create``
    leaves them."""
    found = []
    for row in rows:
        values = {}
        for field in row._meta.concrete_fields:
            value = field.pre_save(row, add=True)
            if isinstance(value, datetime):
                value = value.isoformat()
            elif isinstance(value, Decimal):  # exact: PostgreSQL reads the text as numeric
                value = str(value)
            values[field.column] = value
        found.append(values)
        row._state.adding, row._state.db = False, DEFAULT_DB_ALIAS
    return json.dumps(found)


_alone: ContextVar[bool] = ContextVar("one_statement", default=False)


@contextmanager
def one_statement() -> Iterator[None]:
    """A transaction of exactly one statement: sent in autocommit, outside a transaction; inside
    one, it joins it (nothing changes).

    PostgreSQL makes one statement atomic by itself, so ``transaction.atomic()`` around it buys
    nothing but two round trips (psycopg's ``BEGIN`` before it, the ``COMMIT``). Only for a block
    whose writes are that one statement: no signal receiver, no mirrored frame, nothing else.
    ``transaction.on_commit`` callbacks registered in it run at once, when registered: after the
    statement, whose data every reader sees by then. ``in_one_statement`` says whether the caller
    is in such a block (``stream_log.emit_with``: frames written with their state, by one
    statement).
    """
    token = _alone.set(True)
    try:
        yield
    finally:
        _alone.reset(token)


def in_one_statement() -> bool:
    """Whether the caller runs in ``one_statement`` (in autocommit, or joined to a transaction)."""
    return _alone.get()


def from_json(model: type[Model], row: dict[str, Any]) -> Model:
    """A stored row of ``model`` read as JSON (``to_json(r)``: its columns by name, its JSON
    columns already parsed): its timestamps parsed back, then made as ``made`` makes it."""
    for name in _times(model):
        if row[name] is not None:
            row[name] = datetime.fromisoformat(row[name])
    return made(model, [row[name] for name in _columns(model)])


@functools.cache
def _columns(model: type[Model]) -> list[str]:
    return [str(field.column) for field in model._meta.concrete_fields]


@functools.cache
def _times(model: type[Model]) -> list[str]:
    return [
        str(field.column)
        for field in model._meta.concrete_fields
        if isinstance(field, models.DateTimeField)
    ]


def fetch_one(statement: str, params: Params) -> tuple[Any, ...] | None:
    """Run ``statement``; its first row (``None``: no row)."""
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        row: tuple[Any, ...] | None = cursor.fetchone()
        return row


def fetch_models(
    statement: str, params: Params, *models: type[Model]
) -> tuple[list[Model], tuple[Any, ...]] | None:
    """Run ``statement`` (the columns of each of ``models`` as ``sql.model_columns`` lists them,
    then others); its first row as instances of ``models``, made as the ORM would have read them,
    and the other columns (``None``: no row). Cheaper than ``Model.objects.raw``, which resolves
    the columns of every row it reads by name."""
    row = fetch_one(statement, params)
    return None if row is None else models_of(row, *models)


def models_of(row: Sequence[Any], *models: type[Model]) -> tuple[list[Model], tuple[Any, ...]]:
    """``fetch_models`` of a row already read."""
    found: list[Model] = []
    start = 0
    for model in models:
        width = len(model._meta.concrete_fields)
        values = list(row[start : start + width])
        for index, convert in _converters(model):
            values[index] = convert(values[index], None, connection)
        found.append(made(model, values))
        start += width
    return found, tuple(row[start:])


def made(model: type[Model], values: Sequence[Any]) -> Model:
    """A stored row of ``model`` from its columns' values in field order, converted, as
    ``Model.from_db`` makes it, at a fraction of its cost: the values go straight into the
    instance's ``__dict__`` (where the ORM's field descriptors read them), without ``__init__``'s
    per-field ``setattr`` and its ``pre_init`` / ``post_init`` signals — made the ORM's way when
    a receiver listens to them."""
    if _listened(model):
        return model.from_db(DEFAULT_DB_ALIAS, _attnames(model), list(values))
    instance = model.__new__(model)
    instance.__dict__.update(zip(_attnames(model), values, strict=True))
    instance._state = stored = ModelState()
    # The default database: the one ``connection`` (every statement here) is.
    stored.adding, stored.db = False, DEFAULT_DB_ALIAS
    return instance


def _listened(model: type[Model]) -> bool:
    """Whether an ``pre_init`` or ``post_init`` receiver is connected, for any sender: asked of
    the receivers' list, which ``has_listeners`` would take longer to ask than ``made`` saves."""
    return bool(signals.pre_init.receivers or signals.post_init.receivers)


@functools.cache
def _attnames(model: type[Model]) -> list[str]:
    return [field.attname for field in model._meta.concrete_fields]


@functools.cache
def _converters(model: type[Model]) -> list[tuple[int, Any]]:
    """The fields whose database values need converting (JSON, read as text)."""
    return [
        (index, field.from_db_value)
        for index, field in enumerate(model._meta.concrete_fields)
        if hasattr(field, "from_db_value")
    ]


def fetch_all(statement: str, params: Params) -> list[tuple[Any, ...]]:
    """Run ``statement``; every row."""
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return list(cursor.fetchall())


# The names of a named statement's columns, by its text: read once per process (psycopg makes
# a ``Column`` of each column every time ``cursor.description`` is read: a lock's ~70, each time).
_names: dict[str, list[str]] = {}


def _names_of(statement: str, cursor: Any) -> list[str]:
    names = _names.get(statement)
    if names is None:
        names = _names[statement] = [column.name for column in cursor.description]
    return names


def fetch_row(statement: str, params: Params) -> dict[str, Any] | None:
    """Run ``statement``; its first row, each column by the name the statement gives it
    (``None``: no row)."""
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        row = cursor.fetchone()
        return None if row is None else dict(zip(_names_of(statement, cursor), row, strict=True))


def fetch_rows(statement: str, params: Params) -> list[dict[str, Any]]:
    """Run ``statement``; every row, each column by the name the statement gives it."""
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        names = _names_of(statement, cursor)
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def fetch_models_named(
    statement: str, params: Params, *models: type[Model]
) -> tuple[list[Model], dict[str, Any]] | None:
    """``fetch_models``, the columns after the models' by the names the statement gives them."""
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        row = cursor.fetchone()
        if row is None:
            return None
        names = _names_of(statement, cursor)
    found, others = models_of(row, *models)
    return found, dict(zip(names[len(row) - len(others) :], others, strict=True))


def execute(statement: str, params: Params) -> int:
    """Run ``statement``; the number of rows it wrote."""
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return int(cursor.rowcount)
