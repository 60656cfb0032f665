"""What every new database connection is set up with (``connection_created``), in one statement.

``lock_timeout``: no statement waits longer than ``LOCK_TIMEOUT_SECONDS`` for a row lock, so a
process that is stalled or cut off from the network cannot hold every other process up for as
long as TCP keepalive takes. ``idle_in_transaction_session_timeout``: the server ends a session
left idle in a transaction for ``IDLE_IN_TRANSACTION_SECONDS``, which rolls back that
transaction and releases its locks, so the sweeper can re-drive a run whose worker froze inside
one (``outages``: the frozen worker's next statement finds its session gone, and records
nothing). The same statement reads the database's clock (``clock``).
"""

from __future__ import annotations

import time
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper

from ..conf import agent_settings
from . import clock

OPEN_SESSION = (
    "SELECT clock_timestamp(),"
    " set_config('lock_timeout', %(lock_timeout)s, false),"
    " set_config('idle_in_transaction_session_timeout', %(idle_timeout)s, false)"
)


def open_session(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    """``connection_created`` receiver: the session's timeouts, and the database's clock."""
    settings = agent_settings()
    params = {
        "lock_timeout": _milliseconds(settings.LOCK_TIMEOUT_SECONDS),
        "idle_timeout": _milliseconds(settings.IDLE_IN_TRANSACTION_SECONDS),
    }
    asked = time.monotonic()
    with connection.cursor() as cursor:
        cursor.execute(OPEN_SESSION, params)
        database, *_ = cursor.fetchone()
    clock.remember(connection, database, asked)


def _milliseconds(seconds: float) -> str:
    return f"{round(seconds * 1000)}ms"
