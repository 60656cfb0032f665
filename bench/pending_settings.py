"""Settings of the pending benchmark's daphne: the dev settings without the API's throttles.

The benchmark decides 1,000 calls as one approver as fast as it can: it measures the endpoint,
not the safety net that would refuse most of those requests with 429.
"""

from __future__ import annotations

from config.settings.dev import *  # noqa: F403
from config.settings.dev import AGENT as DEV_AGENT

AGENT = {**DEV_AGENT, "THROTTLE_RATES": {"chat": None, "decision": None}}
