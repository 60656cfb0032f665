"""The database's clock, the one clock every lease and deadline is read from (SPEC §20).

Hosts' clocks drift apart, and a lease set by one host is compared by another: a worker whose
clock ran 30 s ahead took over healthy runs. So no deadline is set or compared on a host's clock.
``now()`` is PostgreSQL's: its ``clock_timestamp()`` read once when this thread's connection
opened (``sessions.open_session``: in the statement that sets the session up, none on the way of
a step), and carried forward on this host's monotonic clock, which no wall-clock step or skew
moves.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper

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


def remember(connection: BaseDatabaseWrapper, database: datetime, asked: float) -> None:
    """Keep on ``connection`` the database's time it answered to a query sent at ``asked`` (this
    host's monotonic clock)."""
    # Read somewhere between the query's start and its answer: take the middle.
    setattr(connection, _ATTRIBUTE, _Reading(database, (asked + time.monotonic()) / 2))
