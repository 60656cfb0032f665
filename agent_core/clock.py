"""The database's clock, the one clock every lease and deadline is read from (SPEC §20).

Hosts' clocks drift apart, and a lease set by one host is compared by another: a worker whose
clock ran 30 s ahead took over healthy runs. So no deadline is set or compared on a host's clock.
``now()`` is PostgreSQL's: its ``clock_timestamp()`` read once when this thread's connection
opened (``connection_created``, one ``SELECT`` per connection, none on the way of a step), and
carried forward on this host's monotonic clock, which no wall-clock step or skew moves.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper

_READ_CLOCK = "SELECT clock_timestamp()"
# Where a connection keeps the reading of the database's clock taken when it opened.
_ATTRIBUTE = "airlock_clock"


@dataclass(frozen=True)
class _Reading:
    """The database's time, and this host's monotonic clock, at one moment."""

    database: datetime
    monotonic: float


def now() -> datetime:
    """The database's current time (this thread's default connection is opened if it is not)."""
    connection.ensure_connection()
    reading: _Reading = getattr(connection, _ATTRIBUTE)
    return reading.database + timedelta(seconds=time.monotonic() - reading.monotonic)


def read_on_connect(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    """``connection_created`` receiver: read the database's clock on the new connection."""
    before = time.monotonic()
    with connection.cursor() as cursor:
        cursor.execute(_READ_CLOCK)
        (database,) = cursor.fetchone()
    # Read somewhere between the query's start and its answer: take the middle.
    setattr(connection, _ATTRIBUTE, _Reading(database, (before + time.monotonic()) / 2))
