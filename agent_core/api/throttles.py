"""DRF throttles per actor on the endpoints that start work: a safety net, not a quota.

Rates come from ``AGENT["THROTTLE_RATES"]`` (``"60/min"``; ``None`` turns one off). The counts live
in Django's default cache, which must be shared by every process that serves the API (Redis):
a per-process cache lets each process take the full rate (system check ``agent_core.W010``).
"""

from __future__ import annotations

import hashlib
from typing import Any

from rest_framework.throttling import SimpleRateThrottle

from ..conf import agent_settings
from .actors import request_actor


class ActorRateThrottle(SimpleRateThrottle):
    """Counts the requests of one actor in ``scope``; the rate is ``AGENT["THROTTLE_RATES"]``."""

    def get_rate(self) -> str | None:
        return agent_settings().THROTTLE_RATES.get(str(self.scope))

    def get_cache_key(self, request: Any, view: Any) -> str:
        # Permissions ran first, so the actor is known; refs may hold any character: hashed.
        ident = hashlib.sha256(request_actor(request).ref.encode()).hexdigest()
        return self.cache_format % {"scope": self.scope, "ident": ident}


class ChatThrottle(ActorRateThrottle):
    """``POST /agent/chat``."""

    scope = "chat"


class DecisionThrottle(ActorRateThrottle):
    """The decision endpoints: approve, reject, answer, extend."""

    scope = "decision"
