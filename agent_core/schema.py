"""Migration operations Airlock's apps share."""

from __future__ import annotations

from django.db.migrations import RunSQL


def dropped(indexes: list[tuple[str, str, str]], *, kept: bool) -> list[RunSQL]:
    """Drop the indexes Django made on each ``(table, column, the hash in their names)``: the
    ``_like`` twin alone (``varchar_pattern_ops``) when the index itself is ``kept``, else both.

    Dropped ``CONCURRENTLY``, without keeping writes out (the migration must not be atomic);
    reversed, built again as Django built them. Not Django's ``AlterField(db_index=False)`` for
    a foreign key: that also drops and adds the key's constraint again, which checks every row
    of the table (``SeparateDatabaseAndState`` keeps the field's new state and runs these)."""
    twins = ("_like",) if kept else ("", "_like")
    return [
        _drop(table, column, f"{table}_{column}_{digest}{twin}")
        for table, column, digest in indexes
        for twin in twins
    ]


def _drop(table: str, column: str, name: str) -> RunSQL:
    opclass = " varchar_pattern_ops" if name.endswith("_like") else ""
    return RunSQL(
        f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"',
        f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{name}" ON "{table}" ("{column}"{opclass})',
    )
