"""Running the core's named statements (``sql``) and making model instances of their rows:
``rows.fetch_all(sql.TRANSCRIPT, …)`` runs a statement that ``sql`` names."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.postgresql.psycopg_any import register_tzloader
from django.db.backends.utils import CursorWrapper
from django.db.models import Model, signals
from django.db.models.base import ModelState
from psycopg import ClientCursor, Connection, Cursor, adapters
from psycopg.pq import Format

from .conf import agent_settings

# A connection prepares one of the core's statements the second time it runs it (psycopg's
# threshold counts the runs before the one that prepares): a statement run once (a process's
# start-up, a rare path) costs no extra round trip to prepare.
PREPARE_THRESHOLD = 1
_TIMESTAMPTZ = adapters.types["timestamptz"].oid


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
    is in such a block (``streams.emit_if``: frames written with their state, by one statement).
    """
    token = _alone.set(True)
    try:
        yield
    finally:
        _alone.reset(token)


def in_one_statement() -> bool:
    """Whether the caller runs in ``one_statement`` (in autocommit, or joined to a transaction)."""
    return _alone.get()


@contextmanager
def _cursor() -> Iterator[CursorWrapper]:
    """Django's cursor (its connection checks, execute wrappers, query log and error
    translation), bound on the server when ``AGENT["PREPARED_STATEMENTS"]``: psycopg sends the
    parameters apart from the statement instead of quoting them into its text in Python, and
    the connection prepares the statement on its second run, so PostgreSQL parses and plans each
    of the core's statements once per connection. Django's own queries keep the project's binding:
    the threshold set here only reaches server-bound cursors, which a project binding on the
    client has none of but these; a project binding on the server keeps its own threshold.

    Not while Django logs queries (``DEBUG``, ``CaptureQueriesContext``): its log shows a
    statement with its values only when the values were quoted into it (of a prepared one it
    would show nothing), so then the core's statements are bound on the client as Django's are.

    One cursor a statement: Django's ``cursor()`` would make a client-bound one to be replaced, so
    its steps before it wraps a cursor (``BaseDatabaseWrapper._cursor``: the health check, the
    connection, which refuses an event loop, the thread check, database errors translated) are
    taken here around the bound one. ``tests/agent_core/test_prepared.py`` pins the text of the
    steps copied: a Django release that changes them fails it until they are read again."""
    # This thread's connection, looked up once: each use of the ``connection`` proxy looks it up.
    db = connections[DEFAULT_DB_ALIAS]
    if not db.queries_logged and agent_settings().PREPARED_STATEMENTS:
        db.close_if_health_check_failed()
        db.ensure_connection()
        if issubclass(db.connection.cursor_factory, ClientCursor):
            db.validate_thread_sharing()
            with db.wrap_database_errors:
                bound = _bound_on_server(db)
            with CursorWrapper(bound, db) as cursor:  # as ``make_cursor`` wraps it
                yield cursor
            return
    with db.cursor() as cursor:  # the project's own binding
        yield cursor


def _bound_on_server(db: BaseDatabaseWrapper) -> Cursor[Any]:
    raw: Connection[Any] = db.connection
    if raw.prepare_threshold is None:
        raw.prepare_threshold = PREPARE_THRESHOLD
    bound: Cursor[Any] = Cursor(raw)
    # As Django's ``create_cursor``: the cursor reads times in the connection's time zone.
    loader = raw.adapters.get_loader(_TIMESTAMPTZ, Format.TEXT)
    if getattr(loader, "timezone", None) != db.timezone:
        register_tzloader(db.timezone, bound)
    return bound


def fetch_one(statement: str, params: list[Any]) -> tuple[Any, ...] | None:
    """Run ``statement``; its first row (``None``: no row)."""
    with _cursor() as cursor:
        cursor.execute(statement, params)
        row: tuple[Any, ...] | None = cursor.fetchone()
        return row


def fetch_models(
    statement: str, params: list[Any], *models: type[Model]
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


def fetch_all(statement: str, params: list[Any]) -> list[tuple[Any, ...]]:
    """Run ``statement``; every row."""
    with _cursor() as cursor:
        cursor.execute(statement, params)
        return list(cursor.fetchall())


def execute(statement: str, params: list[Any]) -> int:
    """Run ``statement``; the number of rows it wrote."""
    with _cursor() as cursor:
        cursor.execute(statement, params)
        return int(cursor.rowcount)
