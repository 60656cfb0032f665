"""The durable runner's cycle driven in this process: its tasks kept in a list, each driven once
the one before returned (no broker, no worker). What the durable runner itself does a cycle
(leases, chaining, hand-offs), Celery's part excluded: for ``cycle_instructions.py --durable``
and ``sql_floor.py --durable``. Needs Django set up (``bench.approval_cycle`` imported first)."""

from __future__ import annotations

from collections import deque

from agent_core.runner.durable import DurableRunner
from bench.approval_cycle import approve, start


class InProcessDurable(DurableRunner):
    """The durable runner with its tasks kept here, each driven once the one before returned."""

    def __init__(self) -> None:
        super().__init__()
        self.tasks: deque[tuple[str, str, int | None]] = deque()

    def enqueue(
        self, run_id: str, queue: str, *, countdown: float = 0, token: int | None = None
    ) -> None:
        self.tasks.append((run_id, queue, token))

    def cycle(self) -> None:
        """``approval_cycle.cycle`` for this runner: start, the tasks to the park, approve, the
        tasks to the end."""
        parked = start("bench").pk
        self.drain()
        approve(parked)
        self.drain()

    def drain(self) -> None:
        while self.tasks:
            run_id, queue, token = self.tasks.popleft()
            self.drive(run_id, queue, token=token)
