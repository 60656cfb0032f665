"""The core's named statements run on Django's own cursor, bound as the project binds every
query: with Django's ``server_side_binding`` and psycopg's ``prepare_threshold`` (public options
of ``DATABASES["OPTIONS"]``) they are prepared once per connection; without, bound on the
client. No copy of Django's cursor setup, so no pin of its source. What a connection has
prepared is read from PostgreSQL (``pg_prepared_statements``)."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.core.exceptions import SynchronousOnlyOperation
from django.db import IntegrityError, connection
from django.test.utils import CaptureQueriesContext

from agent_core.engine import rows
from tests.conftest import ALICE

pytestmark = pytest.mark.django_db

# A thread inserted by id: run twice with one id, its second run fails on the primary key.
INSERT_THREAD = (
    "INSERT INTO agent_core_thread (id, owner_ref, agent, title, created_at, updated_at)"
    " VALUES (%s, %s, 'support', '', now(), now())"
)


def prepared() -> list[str]:
    """The statements this thread's connection has prepared."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [statement for (statement,) in cursor.fetchall()]


def core(name: str) -> str:
    """A statement run through ``rows``, told apart from every other by ``name``."""
    return f"SELECT %s::text AS {name}, now()"


@pytest.fixture
def bound_on_the_server() -> Iterator[None]:
    """The connection as Django opens it with ``OPTIONS = {"server_side_binding": True,
    "prepare_threshold": 1}`` (its cursors bind on the server; psycopg prepares a statement the
    second time the connection runs it)."""
    connection.ensure_connection()
    raw: Any = connection.connection
    factory, threshold = raw.cursor_factory, raw.prepare_threshold
    raw.cursor_factory, raw.prepare_threshold = psycopg.Cursor, 1
    try:
        yield
    finally:
        raw.cursor_factory, raw.prepare_threshold = factory, threshold


@pytest.mark.usefixtures("bound_on_the_server")
def test_bound_on_the_server_a_core_statement_is_prepared_the_second_time() -> None:
    statement = core("second_run")
    assert rows.fetch_one(statement, ["a"])[0] == "a"  # type: ignore[index]
    assert not [s for s in prepared() if "second_run" in s]
    assert rows.fetch_all(statement, ["b"])[0][0] == "b"
    [text] = [s for s in prepared() if "second_run" in s]
    assert "$1" in text  # the parameter travels apart from the statement
    assert rows.fetch_one(statement, ["c"])[0] == "c"  # type: ignore[index]
    assert len([s for s in prepared() if "second_run" in s]) == 1  # prepared once


@pytest.mark.usefixtures("bound_on_the_server")
def test_times_read_by_a_prepared_statement_are_aware_and_in_utc() -> None:
    for value in "ab":
        found = rows.fetch_one(core("times"), [value])
        assert found is not None
        assert found[1].tzinfo is not None and found[1].utcoffset() == datetime.timedelta(0)


@pytest.mark.usefixtures("bound_on_the_server")
def test_errors_of_a_prepared_statement_are_djangos() -> None:
    assert rows.execute(INSERT_THREAD, ["thr_prepared", ALICE.ref]) == 1
    with pytest.raises(IntegrityError):  # its second run is prepared, and fails as the first would
        rows.execute(INSERT_THREAD, ["thr_prepared", ALICE.ref])


def test_bound_on_the_client_nothing_is_prepared() -> None:
    for value in "abc":
        assert rows.fetch_one(core("client_bound"), [value])[0] == value  # type: ignore[index]
    assert not [s for s in prepared() if "client_bound" in s]


def test_logged_queries_are_the_statements_production_runs() -> None:
    """Django's query log sees the core's statements on the one path they take (no other
    binding while it logs): a query-count test counts what production runs."""
    statement = core("logged")
    with CaptureQueriesContext(connection) as queries:
        for value in ("first", "second"):
            assert rows.fetch_one(statement, [value])[0] == value  # type: ignore[index]
    logged = [q["sql"] for q in queries.captured_queries if "logged" in q["sql"]]
    assert len(logged) == 2 and "'second'" in logged[1]


def test_a_core_statement_on_an_event_loop_is_refused_as_djangos_are() -> None:
    async def on_the_loop() -> None:
        rows.fetch_one(core("on_the_loop"), ["a"])

    with pytest.raises(SynchronousOnlyOperation):
        asyncio.run(on_the_loop())
