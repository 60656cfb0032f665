"""DRF throttles per actor on the endpoints that start work: a safety net, not a quota.

Rates come from ``AGENT["THROTTLE_RATES"]`` (``"60/min"``; ``None`` turns one off). The counts live
in Django's default cache, which must be shared by every process that serves the API (Redis):
a per-process cache lets each process take the full rate (system check ``agent_core.W010``).
"""

from __future__ import annotations

import hashlib
import math
from typing import Any, cast

from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle
from rest_framework.views import APIView

from ..actors import Actor
from ..conf import agent_settings
from ..exceptions import Throttled
from .actors import request_actor


class ActorRateThrottle(SimpleRateThrottle):
    """Counts the requests of one actor in ``scope``; the rate is ``AGENT["THROTTLE_RATES"]``.

    DRF builds one per request of a view that names it; another surface (the console's
    decisions) builds it with the actor and calls ``check``, and counts in the same bucket."""

    def __init__(self, actor: Actor | None = None) -> None:
        super().__init__()
        self.actor = actor

    def get_rate(self) -> str | None:
        return agent_settings().THROTTLE_RATES.get(str(self.scope))

    def get_cache_key(self, request: Any, view: Any) -> str:
        # Permissions ran first, so the actor is known; refs may hold any character: hashed.
        actor = self.actor or request_actor(request)
        ident = hashlib.sha256(actor.ref.encode()).hexdigest()
        return self.cache_format % {"scope": self.scope, "ident": ident}

    def check(self) -> None:
        """Count one request of the actor given, outside a DRF view; ``Throttled`` past the
        rate."""
        assert self.actor is not None, "check() counts for the actor the throttle was built with"
        if not self.allow_request(cast(Request, None), cast(APIView, None)):
            raise Throttled(retry_after=math.ceil(self.wait() or 1))


class ChatThrottle(ActorRateThrottle):
    """``POST /agent/chat``."""

    scope = "chat"


class DecisionThrottle(ActorRateThrottle):
    """The decision endpoints: approve, reject, answer, extend."""

    scope = "decision"
