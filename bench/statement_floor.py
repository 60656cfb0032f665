"""The statement floor of the approval cycle (issue 18): the cycle's round trips, with nothing
in them.

``recording`` notes the shape of what this thread's connection sends: each statement sent in
autocommit (a read, or a write that commits by itself) and each transaction (how many statements;
psycopg sends its ``BEGIN`` and ``COMMIT`` as round trips of their own). ``replay`` sends the same
shape through Django's cursor with trivial statements: ``SELECT 1`` for a read, a one-row
``INSERT`` for an autocommitted write and for each transaction's first statement (so each commits
a write, as the cycle's do), ``SELECT 1`` for the rest. Its time is what the cycle's statements
cost the driver, the server and the network before any of our Python runs; the cycle divided by
it says how much is left to ours. It keeps what was sent too (``Shape.sent``), for
``bench/sql_floor.py``, which replays the statements themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from django.db import connection, transaction
from psycopg.pq import TransactionStatus

PAYLOAD = '{"kind": "frame", "data": {"text": "a typical row of a cycle"}}'


class Sent(NamedTuple):
    """A statement as the connection sent it: ``begins`` a transaction (psycopg sent ``BEGIN``
    before it), ``alone`` in autocommit, else in the transaction begun before it; ``poll``: a read
    the benchmark made itself (``recording``'s ``is_poll``), not one of the cycle's."""

    sql: str
    params: Any
    many: bool
    poll: bool
    begins: bool
    alone: bool


@dataclass
class Shape:
    """What one cycle sent: autocommitted reads and writes, and each transaction's statements."""

    reads: int = 0
    writes: int = 0
    transactions: list[int] = field(default_factory=list)
    sent: list[Sent] = field(default_factory=list)

    @property
    def statements(self) -> int:
        return self.reads + self.writes + sum(self.transactions)

    @property
    def round_trips(self) -> int:
        return self.statements + 2 * len(self.transactions)


@contextmanager
def recording(shape: Shape, is_poll: Callable[[], bool] = lambda: False) -> Iterator[Shape]:
    """Note the shape of what this thread's connection sends into ``shape``; ``is_poll`` says
    whether a statement is the benchmark's own read."""

    def note(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        alone = connection.get_autocommit()
        begins = (
            not alone and connection.connection.info.transaction_status == TransactionStatus.IDLE
        )
        if alone:
            if sql.lstrip().upper().startswith("SELECT"):
                shape.reads += 1
            else:
                shape.writes += 1
        elif begins:
            shape.transactions.append(1)  # psycopg sends BEGIN before it
        else:
            shape.transactions[-1] += 1
        shape.sent.append(Sent(sql, params, many, is_poll(), begins, alone))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(note):
        yield shape


def replay(shape: Shape) -> None:
    """Send ``shape`` with trivial statements (the table ``bench_floor`` must exist)."""
    with connection.cursor() as cursor:
        for _ in range(shape.reads):
            cursor.execute("SELECT 1")
        for _ in range(shape.writes):
            cursor.execute("INSERT INTO bench_floor (d) VALUES (%s)", [PAYLOAD])
    for statements in shape.transactions:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("INSERT INTO bench_floor (d) VALUES (%s)", [PAYLOAD])
            for _ in range(statements - 1):
                cursor.execute("SELECT 1")
