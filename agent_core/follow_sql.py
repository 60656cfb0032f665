"""The raw SQL of following a run's stream, named as in ``sql`` (read-only): who may follow the
run, and its catch-up."""

from __future__ import annotations

from .models import Run, StreamFrame, Thread
from .sql import model_columns

# A run as its thread's owner follows it (access.visible_run: a stream attaching): run id, owner.
OWNED_RUN = (
    f"SELECT {model_columns(Run, 'r')} FROM {Run._meta.db_table} r JOIN {Thread._meta.db_table} t"
    " ON t.id = r.thread_id WHERE r.id = %s AND t.owner_ref = %s"
)

# A run's end and its frames after a seq, in one statement and so one snapshot (live._catch_up:
# a stream attaching, catching up, or ending): run id, run id, seq. The run's row first (its
# status, error code and message), then a row per frame in seq order (its seq, kind, data and
# whether superseded), each with NULL in the other's columns; none when the run is gone (its
# frames go with it, in the same transaction).
CATCH_UP = (
    "SELECT status, error_code, error_message, NULL, NULL, NULL, NULL"
    f" FROM {Run._meta.db_table} WHERE id = %s"
    f" UNION ALL SELECT NULL, NULL, NULL, seq, kind, data, superseded"
    f" FROM {StreamFrame._meta.db_table} WHERE run_id = %s AND seq > %s ORDER BY 4 NULLS FIRST"
)
