"""A step's record, still to be made, and the transaction it makes it in.

A step hands its record to the loop unmade: ``loop.take`` makes it (``make``), and
``loop.take_and_open`` makes it and opens the next step in one transaction (``shared``: chained
steps, docs/internals/durable-runner.md). Which transaction that is depends only on the kind of
record, never on a flag.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

from django.db import transaction

from ..engine.dispatch import NextStep
from ..engine.journal import Recorded


@dataclass(frozen=True)
class Record:
    """A step's record: ``write`` writes it, in the transaction the record is made in."""

    write: Callable[[], NextStep | Recorded]

    def make(self) -> NextStep | Recorded:
        """Make the record in a transaction of its own (or the caller's, without a savepoint:
        an error in it ends the caller's anyway)."""
        with transaction.atomic(savepoint=False):
            return self.write()

    def shared(self) -> AbstractContextManager[object]:
        """The transaction this record and the opening of the next step commit in."""
        return transaction.atomic()


@dataclass(frozen=True)
class OneStatement(Record):
    """A record that is one statement, after which a tool step comes, which opens without
    writing (``proposals.records_alone``): the statement commits by itself, in autocommit, so
    neither needs a transaction (``BEGIN`` and ``COMMIT`` would be two round trips for
    nothing)."""

    def make(self) -> NextStep | Recorded:
        return self.write()

    def shared(self) -> AbstractContextManager[object]:
        return nullcontext()
