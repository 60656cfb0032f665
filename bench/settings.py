"""Settings of the approval-cycle benchmark: the dev settings plus the benchmark's agent."""

from __future__ import annotations

from typing import Any

from config.settings.dev import *  # noqa: F403
from config.settings.dev import AGENT as DEV_AGENT

DEBUG = False
LOGGING = {"version": 1, "disable_existing_loggers": False}
# The default policy (the requester approves every action): the demo's policy lets small refunds
# through without asking, and the cycle must ask.
_agent: dict[str, Any] = {
    **DEV_AGENT,
    "AGENTS": [*DEV_AGENT["AGENTS"], "bench.agent.bench_agent", "bench.agent.bench_parent_agent"],
    "APPROVAL_POLICY": "approvals.policy.DefaultPolicy",
}
AGENT = _agent
# Workers and the benchmark keep their database connection across tasks (as a deployment
# should): otherwise every step task pays for a new PostgreSQL connection. Django's default of
# no health checks: with them, every task would begin with a `SELECT 1` of its own.
DATABASES["default"]["CONN_MAX_AGE"] = 60  # noqa: F405
DATABASES["default"]["CONN_HEALTH_CHECKS"] = False  # noqa: F405
# Every statement bound on the server and prepared the second time a connection runs it, through
# Django's public options (docs/howto/prepared-statements.md): PostgreSQL parses and plans each
# once per connection.
DATABASES["default"]["OPTIONS"] = {"server_side_binding": True, "prepare_threshold": 1}  # noqa: F405
