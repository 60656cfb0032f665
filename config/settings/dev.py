"""Development and demo settings: DEBUG on, a fixed local secret."""

from __future__ import annotations

import os

from .base import *  # noqa: F403

DEBUG = os.environ.get("DEBUG", "1") == "1"
SECRET_KEY = SECRET_KEY or "dev-only-not-secret"  # noqa: F405

# The demo's approval policy: refunds need finance (15 minutes; under 20 free), campaigns need
# two marketing approvals, cache purges the requester (rememberable). Tests keep the default policy.
# The API accepts a signed-in user or, for the README's curl examples, the X-Actor-* headers.
AGENT = {
    **AGENT,  # noqa: F405
    "APPROVAL_POLICY": "demo.policy.DemoPolicy",
    "ACTOR_RESOLVER": "agent_core.actors.DevelopmentResolver",
}

# Approvers are notified by email; the demo's emails are printed on the terminal of `make demo`.
# They hold live decision links (bearer links for their person): fine for the demo, never in
# production, where the server log would carry them (docs/explanation/security.md).
EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
APPROVALS = {
    # An approver may push a refund's 15-minute deadline at most an hour past now (default: the
    # policy's ttl again).
    "MAX_EXTENSION": {"issue_refund": 3600},
    "NOTIFICATION_BACKENDS": ["approvals.notify.backends.EmailBackend"],
    "BASE_URL": os.environ.get("AIRLOCK_BASE_URL", "http://127.0.0.1:8000"),
    # "yes" / "no" in the chat decide the pending call (the demo agent has text_decisions), in
    # English and German.
    "TEXT_DECISIONS": {
        "en": {
            "approve": ["yes", "approve", "confirm"],
            "always": ["approve always", "yes always"],
            "reject": ["no", "reject", "cancel"],
        },
        "de": {
            "approve": ["ja", "genehmigen", "bestätigen"],
            "always": ["immer genehmigen", "ja immer"],
            "reject": ["nein", "ablehnen", "abbrechen"],
        },
    },
}

# With an OpenAI-compatible endpoint configured, the demo agent talks to a real model.
if os.environ.get("OPENAI_BASE_URL"):
    AGENT["MODEL"] = "openai:" + os.environ.get("AIRLOCK_DEMO_MODEL", "gpt-4o-mini")
