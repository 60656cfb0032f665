"""A ``recover()`` for the warehouse's calls found in doubt (``AGENT["MCP_SERVERS"]`` →
``"recover"``): asks the warehouse's own record whether the reservation was made."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agent_core.tools import Recovered, ToolContext
from tests.mcp.conftest import reservations


def reservation_made(ctx: ToolContext, args: dict[str, Any]) -> Recovered:
    made = reservations(Path(os.environ["AIRLOCK_TEST_WAREHOUSE_LOG"]), args["reference"])
    return Recovered(done=bool(made), result=made[0] if made else None)
