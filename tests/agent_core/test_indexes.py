"""The indexes of Airlock's tables: none that no query reads (issue 18). Each is one more entry,
and WAL record, for every row written: Django's ``varchar_pattern_ops`` twins of ids (for
``LIKE 'prefix%'``, which nothing asks of an id) and the own index of a foreign key that a
composite index leads with were a third of an approval cycle's WAL records."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection

pytestmark = pytest.mark.django_db

# Every index of the apps' tables: table, index, unique, partial, key columns in order, its SQL.
INDEXES = """
SELECT t.relname, x.relname, i.indisunique, i.indpred IS NOT NULL,
       ARRAY(SELECT a.attname FROM unnest(i.indkey) WITH ORDINALITY k(attnum, n)
             JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
             WHERE k.n <= i.indnkeyatts ORDER BY k.n),
       pg_get_indexdef(i.indexrelid)
FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid JOIN pg_class x ON x.oid = i.indexrelid
WHERE t.relname LIKE 'agent\\_core\\_%' OR t.relname LIKE 'approvals\\_%'
"""


def indexes() -> list[tuple[str, str, bool, bool, list[str], str]]:
    with connection.cursor() as cursor:
        cursor.execute(INDEXES)
        return list(cursor.fetchall())


def test_no_index_serves_prefix_searches_of_ids_and_keys() -> None:
    twins = [name for _, name, *_, sql in indexes() if "_pattern_ops" in sql]
    assert twins == []


def test_no_index_repeats_the_leading_columns_of_another() -> None:
    found = indexes()
    covered = [
        name
        for table, name, unique, partial, keys, _ in found
        if not unique and not partial
        for other_table, other, _, other_partial, other_keys, _ in found
        if other_table == table and other != name and not other_partial
        if other_keys[: len(keys)] == keys
    ]
    assert covered == []


def test_the_models_say_what_the_migrations_made() -> None:
    call_command("makemigrations", "agent_core", "approvals", check=True, dry_run=True)
