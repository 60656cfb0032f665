"""The abort signal a driver hands its provider and tools: set when the run is being cancelled.

The cancel may arrive on any process (a web server, another worker), so the signal looks at the
run's ``cancel_requested`` flag in the database, at most once every ``CANCEL_POLL_MS``: cheap
enough to ask per streamed token, and it needs no channel between the canceller and the driver.
"""

from __future__ import annotations

import time

from ..conf import agent_settings
from ..models import Run
from ..tools import AbortSignal


class CancelWatch(AbortSignal):
    """An ``AbortSignal`` that sets itself once the run's cancel has been requested."""

    def __init__(self, run_id: str, *, fresh: bool = False) -> None:
        """``fresh``: the caller has just read the run ``running`` (a cancel makes it
        ``cancelling``), so the first poll waits one interval like any later one."""
        super().__init__()
        self.run_id = run_id
        self._interval = agent_settings().CANCEL_POLL_MS / 1000
        self._checked = time.monotonic() if fresh else 0.0

    def is_set(self) -> bool:
        if super().is_set():
            return True
        now = time.monotonic()
        if now - self._checked >= self._interval:
            self._checked = now
            if Run.objects.filter(pk=self.run_id, cancel_requested=True).exists():
                self.set()
        return super().is_set()

    def wait(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.is_set():
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return False
            step = self._interval if remaining is None else min(self._interval, remaining)
            super().wait(step)
        return True
