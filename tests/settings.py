"""Settings of the test suite and of every process a test starts: real PostgreSQL and Redis from
the environment, no real model calls, the test tree's agents and providers.

A process a test starts (a worker, a server, the CLI) gets its environment from
``tests.processes.child_env``: these settings, and ``DATABASE_URL`` pointing at pytest-django's test
database; ``AIRLOCK_TEST_*`` variables tune it (lease, sweep, quotas, pauses, ...).
"""

from __future__ import annotations

import json
import os
from typing import Any

from config.settings.base import *  # noqa: F403
from config.settings.base import AGENT as BASE_AGENT

SECRET_KEY = "test-only-not-secret"
DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGGING = {"version": 1, "disable_existing_loggers": False}

# A connection per request, as before, unless a test's process asks for persistent ones (the
# production layout's test).
DATABASES["default"]["CONN_MAX_AGE"] = int(os.environ.get("CONN_MAX_AGE", "0"))  # noqa: F405

_NOWHERE = {"BASE_URL": "http://127.0.0.1:9", "API_KEY": "test-only"}
_agent: dict[str, Any] = {
    **BASE_AGENT,
    "AGENTS": [
        *BASE_AGENT["AGENTS"],
        "tests.durable.agents.crash_agent",
        "tests.durable.agents.slow_agent",
        "tests.durable.agents.flaky_agent",
        "tests.durable.agents.desk_agent",
        "tests.durable.agents.relay_agent",
        "tests.durable.agents.lawyer_agent",
        "tests.durable.agents.designer_agent",
        "tests.durable.agents.review_agent",
        "tests.durable.agents.review_by_relay_agent",
        "tests.durable.agents.chain_agent",
        "tests.durable.agents.looper_agent",
        "tests.faults.agents.outage_agent",
    ],
    "PROVIDERS": {
        "scripted": "agent_core.providers.scripted.ScriptedProvider",
        "openai": "agent_core.providers.openai.OpenAIProvider",
        "anthropic": "agent_core.providers.anthropic.AnthropicProvider",
        "slow": "tests.durable.agents.SlowProvider",
        "flaky": "tests.durable.agents.FlakyProvider",
    },
    "LEASE_SECONDS": int(os.environ.get("AIRLOCK_TEST_LEASE_SECONDS", "30")),
    "SWEEP_SECONDS": int(os.environ.get("AIRLOCK_TEST_SWEEP_SECONDS", "5")),
    # A fault test's frozen worker, or a host cut off inside a transaction
    # (tests/faults/test_partition.py), loses its open transaction (and the row locks it held)
    # this soon, so the run is taken over while it is still away.
    "IDLE_IN_TRANSACTION_SECONDS": float(
        os.environ.get("AIRLOCK_TEST_IDLE_IN_TRANSACTION_SECONDS", "60")
    ),
    "CHAIN_MAX_STEPS": int(os.environ.get("AIRLOCK_TEST_CHAIN_MAX_STEPS", "16")),
    # No test reaches a real model vendor: unless a test points a provider at its own fake
    # server, it talks to a closed local port (the environment's OPENAI_* / ANTHROPIC_* unused).
    "OPENAI": _NOWHERE,
    "ANTHROPIC": _NOWHERE,
    # The suite starts many turns as one actor: throttled only where a test lowers the rates.
    "THROTTLE_RATES": {
        "chat": os.environ.get("AIRLOCK_TEST_CHAT_RATE", "100000/min"),
        "decision": os.environ.get("AIRLOCK_TEST_DECISION_RATE", "100000/min"),
    },
}
# A server process a browser test starts decides under the policy the test process uses.
if os.environ.get("AIRLOCK_TEST_APPROVAL_POLICY"):
    _agent["APPROVAL_POLICY"] = os.environ["AIRLOCK_TEST_APPROVAL_POLICY"]
# Quotas for a process a test starts (a server, the CLI): the JSON of AGENT["QUOTAS"].
if os.environ.get("AIRLOCK_TEST_QUOTAS"):
    _agent["QUOTAS"] = json.loads(os.environ["AIRLOCK_TEST_QUOTAS"])
# The demo's MCP warehouse of a worker a test starts: where its reservations go, and how long a
# reservation takes (so a crash test can SIGKILL the worker mid-call); see tests/mcp/.
if os.environ.get("AIRLOCK_TEST_WAREHOUSE_LOG"):
    _agent["MCP_SERVERS"] = {
        "warehouse": {
            **BASE_AGENT["MCP_SERVERS"]["warehouse"],
            "env": {
                "DEMO_WAREHOUSE_LOG": os.environ["AIRLOCK_TEST_WAREHOUSE_LOG"],
                "DEMO_WAREHOUSE_DELAY": os.environ.get("AIRLOCK_TEST_WAREHOUSE_DELAY", "0"),
            },
            "recover": os.environ.get("AIRLOCK_TEST_WAREHOUSE_RECOVER", ""),
        }
    }
AGENT = _agent
# The browser tests extend deadlines with the console's steps (up to a day); the tests of the
# extension bound set APPROVALS themselves.
APPROVALS: dict[str, Any] = {"MAX_EXTENSION": {"*": 86400}}

# A worker process a notification test starts delivers to that test's local webhook receiver.
if os.environ.get("AIRLOCK_TEST_WEBHOOK_URL"):
    APPROVALS = {
        **APPROVALS,
        "RULES": {"issue_refund": {"approver": "finance"}},
        "NOTIFICATION_BACKENDS": [
            {
                "BACKEND": "approvals.notify.backends.WebhookBackend",
                "OPTIONS": {"URL": os.environ["AIRLOCK_TEST_WEBHOOK_URL"], "SECRET": "whsec-test"},
            }
        ],
        "NOTIFICATION_BACKOFF": 0.2,
        "NOTIFICATION_ATTEMPTS": int(os.environ.get("AIRLOCK_TEST_NOTIFICATION_ATTEMPTS", "5")),
        "NOTIFICATION_LEASE": float(os.environ.get("AIRLOCK_TEST_NOTIFICATION_LEASE", "60")),
    }
    # ... and may kill each delivery task at a hard time limit (s; prefork workers only).
    if os.environ.get("AIRLOCK_TEST_NOTIFY_TIME_LIMIT"):
        _limit = float(os.environ["AIRLOCK_TEST_NOTIFY_TIME_LIMIT"])
        CELERY_TASK_ANNOTATIONS = {"approvals.deliver_notification": {"time_limit": _limit}}

# A worker process a tracing test starts exports its spans to that test's file.
if os.environ.get("AIRLOCK_TEST_SPANS_FILE"):
    from tests.spans import export_to_file

    export_to_file(os.environ["AIRLOCK_TEST_SPANS_FILE"])
    AGENT["TRACING"] = True

# Fault injection, in Celery workers only (Celery imports these modules when a worker starts):
# seconds a worker waits at a point between two commits, so a crash test can SIGKILL it there.
# ("after", "llm"): 30 comes from AIRLOCK_TEST_PAUSE_AFTER_LLM=30; see tests/durable/faults.py.
CELERY_IMPORTS = ["tests.durable.faults"]
TEST_PAUSES: dict[tuple[str, str], float] = {}
for _moment in ("before", "after"):
    for _kind in ("llm", "tool"):
        _seconds = os.environ.get(f"AIRLOCK_TEST_PAUSE_{_moment}_{_kind}".upper())
        if _seconds:
            TEST_PAUSES[_moment, _kind] = float(_seconds)

# Console decisions are sent at once, unless a browser test of the undo window asks for one.
AIRLOCK_CONSOLE = {
    **AIRLOCK_CONSOLE,  # noqa: F405
    "UNDO_SECONDS": int(os.environ.get("AIRLOCK_TEST_UNDO_SECONDS", "0")),
}
