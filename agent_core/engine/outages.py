"""A lost database told apart from a failed step, and a service away from a bug (SPEC §20).

When PostgreSQL restarts, fails over, or ends a session (a lock or idle timeout), the statement
in flight raises and the transaction is rolled back. Nothing the step wrote in it is kept, so the
step may run again. That error says nothing about the step: it must never be recorded as the
tool's failure or the run's. The runners let such an error escape instead. The run keeps its
lease until that runs out, and then the sweeper drives it again. A call that was left
``executing`` goes through ``recover`` (SPEC §5).
"""

from __future__ import annotations

import psycopg
import redis
from django.db import InterfaceError
from kombu.exceptions import OperationalError as BrokerError

# SQLSTATEs that end the transaction for reasons outside the statement: the server shutting down
# or not yet accepting connections, the session ended for idling in a transaction, a lock not
# taken within ``lock_timeout``. Class 08 (connection exceptions) is matched by its prefix.
_NOT_THE_STEP = frozenset({"57P01", "57P02", "57P03", "25P03", "55P03"})

# What ``Retry-After`` says while a service is away: about one restart of PostgreSQL or Redis.
RETRY_AFTER_SECONDS = 5


def database_lost(exc: BaseException) -> bool:
    """Whether ``exc`` (or the driver error it wraps) means that the database went away, or that
    it ended the transaction for a reason that has nothing to do with the statement."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, InterfaceError | psycopg.InterfaceError):
            return True  # the connection was already closed
        if isinstance(seen, psycopg.Error):
            state = seen.sqlstate
            if state is None:
                # The client found the socket closed (no answer from the server).
                return isinstance(seen, psycopg.OperationalError)
            # Not only OperationalErrors: psycopg raises 25P03 as an InternalError.
            return state.startswith("08") or state in _NOT_THE_STEP
        seen = seen.__cause__
    return False


def service_away(exc: BaseException) -> bool:
    """Whether ``exc`` means that PostgreSQL or Redis (the broker, the cache, the channel layer)
    could not be reached: the request may succeed if it is made again shortly (503)."""
    if database_lost(exc):
        return True
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, redis.ConnectionError | redis.TimeoutError | BrokerError):
            return True
        seen = seen.__cause__
    return False
