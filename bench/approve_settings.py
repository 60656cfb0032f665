"""Settings of the approve benchmark's servers: the pending benchmark's (no throttles), with the
no-op floor view mounted beside the API (``bench.approve_floor``)."""

from __future__ import annotations

from bench.pending_settings import *  # noqa: F403

ROOT_URLCONF = "bench.approve_floor"
