"""Settings of the daphne processes the live tests (and ``bench/``) start.

The test settings (on the test database: ``tests.processes.django_env``), with the header resolver
(allowed explicitly: DEBUG is off) and the live test agents.
"""

from __future__ import annotations

import os

from tests.settings import *  # noqa: F403
from tests.settings import AGENT

AGENT = {
    **AGENT,
    "AGENTS": [*AGENT["AGENTS"], "tests.live.agents.live_agent"],
    "PROVIDERS": {
        "scripted": "agent_core.providers.scripted.ScriptedProvider",
        "live": "tests.live.agents.LiveProvider",
        "slow": "tests.durable.agents.SlowProvider",
    },
    "ACTOR_RESOLVER": os.environ.get("AIRLOCK_ACTOR_RESOLVER", "agent_core.actors.HeaderResolver"),
    "ALLOW_HEADER_ACTOR": True,
    "STREAM_KEEPALIVE_SECONDS": float(os.environ.get("AIRLOCK_KEEPALIVE", "15")),
    "EXPOSE_ERROR_DETAILS": os.environ.get("AIRLOCK_EXPOSE_ERRORS") == "1",
    # The sweeper's multi-table queries could deadlock with the tests' TRUNCATE between tests;
    # the live tests never need it (no driver dies in them), so it sweeps only at start-up.
    "SWEEP_SECONDS": int(os.environ.get("AIRLOCK_SWEEP_SECONDS", "3600")),
    "STREAM_FRAME_FLUSH_BYTES": int(os.environ.get("AIRLOCK_FLUSH_BYTES", "1024")),
    # The stream budget's test holds hundreds of streams as one actor; the cap has tests of its
    # own (tests/agent_core/test_stream_slots.py).
    "MAX_STREAMS_PER_ACTOR": 1000,
}
