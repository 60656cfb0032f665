"""The packaging tests' database: one of its own, which the project they build migrates from
scratch, dropped afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.conf import settings


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    """The name of a fresh database on this run's server (per test module)."""
    db = settings.DATABASES["default"]
    name = f"{db['NAME']}_pkg"
    params: dict[str, Any] = {"host": db["HOST"], "port": db["PORT"] or None, "user": db["USER"]}
    params["password"] = db["PASSWORD"] or None
    with psycopg.connect(dbname="postgres", autocommit=True, **params) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    yield name
    with psycopg.connect(dbname="postgres", autocommit=True, **params) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
