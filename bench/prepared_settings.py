"""Settings of the approve benchmark's ``--prepared`` turns: the endpoint's, with server-side
binding, so psycopg prepares a statement the second time a connection runs it and PostgreSQL
skips parsing and planning it after that (an experiment: the project does not turn it on)."""

from __future__ import annotations

from bench.pending_settings import *  # noqa: F403
from bench.pending_settings import DATABASES

DATABASES["default"]["OPTIONS"] = {"server_side_binding": True, "prepare_threshold": 2}
