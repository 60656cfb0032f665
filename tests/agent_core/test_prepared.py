"""The core's named statements are bound on the server and prepared once per connection
(``rows``, ``AGENT["PREPARED_STATEMENTS"]``); Django's own queries keep the project's binding.
What a connection has prepared is read from PostgreSQL (``pg_prepared_statements``)."""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import inspect
from contextlib import nullcontext
from typing import Any

import psycopg
import pytest
from django.core.exceptions import SynchronousOnlyOperation
from django.db import DEFAULT_DB_ALIAS, IntegrityError, connection, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from agent_core import rows
from agent_core.models import Run
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


def test_a_core_statement_is_prepared_the_second_time_its_connection_runs_it() -> None:
    statement = core("second_run")
    assert rows.fetch_one(statement, ["a"])[0] == "a"  # type: ignore[index]
    assert not [s for s in prepared() if "second_run" in s]
    assert rows.fetch_all(statement, ["b"])[0][0] == "b"
    [text] = [s for s in prepared() if "second_run" in s]
    assert "$1" in text  # the parameter travels apart from the statement
    assert rows.fetch_one(statement, ["c"])[0] == "c"  # type: ignore[index]
    assert len([s for s in prepared() if "second_run" in s]) == 1  # prepared once


def test_django_queries_keep_binding_on_the_client() -> None:
    for _ in range(3):
        list(Run.objects.filter(agent="prepared-check").values_list("id"))
    assert not [s for s in prepared() if '"agent_core_run"' in s]


@override_settings(AGENT={"PREPARED_STATEMENTS": False})
def test_off_the_core_binds_on_the_client_too() -> None:
    statement = core("switched_off")
    for value in "abc":
        assert rows.fetch_one(statement, [value])[0] == value  # type: ignore[index]
    assert not [s for s in prepared() if "switched_off" in s]


def test_a_project_binding_on_the_server_keeps_its_own_threshold() -> None:
    # Django's ``server_side_binding``: its cursors bind on the server, and the threshold is the
    # project's (None: never prepare), which the core leaves as it is.
    connection.ensure_connection()
    raw: Any = connection.connection
    factory, threshold = raw.cursor_factory, raw.prepare_threshold
    raw.cursor_factory, raw.prepare_threshold = psycopg.Cursor, None
    try:
        statement = core("server_side_project")
        for value in "abc":
            assert rows.fetch_one(statement, [value])[0] == value  # type: ignore[index]
        assert raw.prepare_threshold is None
    finally:
        raw.cursor_factory, raw.prepare_threshold = factory, threshold
    assert not [s for s in prepared() if "server_side_project" in s]


def test_times_read_by_a_prepared_statement_are_aware_and_in_utc() -> None:
    statement = core("times")
    for value in "ab":
        found = rows.fetch_one(statement, [value])
        assert found is not None
        assert found[1].tzinfo is not None and found[1].utcoffset() == datetime.timedelta(0)


def test_errors_of_a_prepared_statement_are_djangos() -> None:
    assert rows.execute(INSERT_THREAD, ["thr_prepared", ALICE.ref]) == 1
    with pytest.raises(IntegrityError):  # its second run is prepared, and fails as the first would
        rows.execute(INSERT_THREAD, ["thr_prepared", ALICE.ref])


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("savepoint", [False, True], ids=["rollback", "savepoint-rollback"])
def test_after_a_rollback_the_core_statements_still_run_and_are_prepared_again(
    savepoint: bool,
) -> None:
    # psycopg forgets what a connection prepared when a transaction or a savepoint rolls back,
    # and deallocates it on the server: nothing may still run by a forgotten name.
    statement = core("rolled_back")
    rows.execute(INSERT_THREAD, ["thr_rolled_back", ALICE.ref])
    with transaction.atomic() if savepoint else nullcontext():
        with pytest.raises(IntegrityError), transaction.atomic():
            for value in "ab":
                assert rows.fetch_one(statement, [value])[0] == value  # type: ignore[index]
            assert [s for s in prepared() if "rolled_back" in s]
            rows.execute(INSERT_THREAD, ["thr_rolled_back", ALICE.ref])  # a duplicate key
        for value in "cde":
            assert rows.fetch_one(statement, [value])[0] == value  # type: ignore[index]
        assert len([s for s in prepared() if "rolled_back" in s]) == 1


@pytest.mark.django_db(transaction=True)
def test_a_dead_connection_is_replaced_before_a_core_statement_with_health_checks_on() -> None:
    # The core makes its cursor itself (one a statement), so it must take Django's checks first:
    # with CONN_HEALTH_CHECKS, a connection that died since the request began is replaced.
    kept = connection.settings_dict.copy()
    # A connection kept between requests (not closed at the next one) and checked at each.
    connection.settings_dict.update(CONN_MAX_AGE=60, CONN_HEALTH_CHECKS=True)
    connection.close()
    try:
        [before] = rows.fetch_one("SELECT pg_backend_pid()", [])  # type: ignore[misc]
        other = connections.create_connection(DEFAULT_DB_ALIAS)
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [before])
        other.close()
        connection.close_if_unusable_or_obsolete()  # what a request's start does: kept
        assert rows.fetch_one(core("healthy"), ["a"])[0] == "a"  # type: ignore[index]
        [after] = rows.fetch_one("SELECT pg_backend_pid()", [])  # type: ignore[misc]
        assert after != before
    finally:
        connection.settings_dict.update(kept)
        connection.close()


def test_a_core_statement_on_an_event_loop_is_refused_as_djangos_are() -> None:
    # Django refuses to block an event loop (``async_unsafe`` on ``cursor()`` and on
    # ``ensure_connection()``); the core's cursor is made apart from ``cursor()`` and must refuse
    # too: a view or consumer that forgot ``sync_to_async`` gets Django's error, not a stalled
    # loop.
    async def on_the_loop() -> None:
        rows.fetch_one(core("on_the_loop"), ["a"])

    with pytest.raises(SynchronousOnlyOperation):
        asyncio.run(on_the_loop())


def test_the_steps_the_core_cursor_copies_from_django_are_djangos() -> None:
    # ``rows._cursor`` takes the steps of Django's private ``_cursor`` and ``_prepare_cursor``
    # itself (one cursor a statement): a Django release that changes them must be read again.
    copied = vars(BaseDatabaseWrapper)  # private: not in the type stubs
    steps = [inspect.getsource(copied["_cursor"]), inspect.getsource(copied["_prepare_cursor"])]
    assert hashlib.sha256("".join(steps).encode()).hexdigest()[:16] == DJANGO_CURSOR_STEPS


# ``test_the_steps_the_core_cursor_copies_from_django_are_djangos``: Django 5.2's.
DJANGO_CURSOR_STEPS = "26161e5671540d67"


def test_while_django_logs_queries_they_are_logged_with_their_values() -> None:
    statement = core("logged")
    with CaptureQueriesContext(connection) as queries:
        for value in ("first", "second", "third"):
            assert rows.fetch_one(statement, [value])[0] == value  # type: ignore[index]
    logged = [q["sql"] for q in queries.captured_queries]
    assert len(logged) == 3 and all(
        f"'{v}'" in logged[i] for i, v in enumerate(["first", "second", "third"])
    ), logged
    assert not [s for s in prepared() if "logged" in s]
