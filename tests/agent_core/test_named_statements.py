"""The core's hot-path statements (``agent_core.engine.sql``) are whole, with named parameters,
and each one prepares on the server: bound there (``server_side_binding``), a parameter named
twice takes one type, so two uses that PostgreSQL would type differently fail the statement at
its first run.
"""

from __future__ import annotations

import re

import pytest
from django.db import connection, transaction

from agent_core.engine import sql

_NAMED = re.compile(r"%\((\w+)\)s")


def _statements() -> dict[str, str]:
    return {
        name: text
        for name, text in vars(sql).items()
        if isinstance(text, str) and name.isupper() and _NAMED.search(text)
    }


def _numbered(text: str) -> str:
    """``text`` with each named parameter as PostgreSQL's ``$n``, its type left to the server."""
    names: list[str] = []

    def number(found: re.Match[str]) -> str:
        if found[1] not in names:
            names.append(found[1])
        return f"${names.index(found[1]) + 1}"

    return _NAMED.sub(number, text)


def test_the_hot_path_statements_are_named():
    assert {"READ_RUN_LOCKED", "RECORD_MODEL_STEP", "FINISH_CALL", "END_RUN"} <= set(_statements())


@pytest.mark.django_db
@pytest.mark.parametrize("name", sorted(_statements()))
def test_each_named_statement_prepares_with_one_type_per_parameter(name):
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"PREPARE named_statement AS {_numbered(_statements()[name])}")
        cursor.execute("DEALLOCATE named_statement")
