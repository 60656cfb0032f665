"""One heartbeat thread per worker process: it renews the leases its tasks hold (SPEC §12).

A step task holds its run's lease while it takes steps; a step may outlast the lease (a slow
model, a long tool), so the lease is renewed every third of ``LEASE_SECONDS`` until the task lets
go. A task used to start a thread of its own for that and join it at the end: about 0.2 ms of
CPU a task, most of it the kernel's, for steps that take a few milliseconds (``bench/README.md``,
"The eleventh session"). Here the process's first task starts one thread, which every later
task shares: a task adds its lease on entering ``holding`` and takes it out on leaving. The
thread sleeps without a database connection while the process holds no lease.

A lease first renewed up to one period after it was taken (not exactly one period, as with a
thread of its own) still is well before it runs out. One taken over by another driver is dropped
from the renewals with a warning; its task learns of it at its next write (``LeaseLost``).
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

from django.db import connection

from ..engine.leases import Lease, renew, renewal_period

logger = logging.getLogger(__name__)

THREAD_NAME = "airlock-heartbeat"


class Heartbeat:
    """The leases this process's tasks hold, and the thread that renews them."""

    def __init__(self) -> None:
        self._held: dict[int, Lease] = {}
        self._numbers = itertools.count()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    @contextmanager
    def holding(self, lease: Lease) -> Iterator[None]:
        """Renew ``lease`` while the block runs."""
        with self._changed:
            number = next(self._numbers)
            self._held[number] = lease
            if self._thread is None:
                self._thread = threading.Thread(target=self._beat, name=THREAD_NAME, daemon=True)
                self._thread.start()
            self._changed.notify()
        try:
            yield
        finally:
            with self._changed:
                self._held.pop(number, None)

    def _beat(self) -> None:
        while True:
            self._wait_for_a_lease()
            time.sleep(renewal_period())
            with self._changed:
                held = dict(self._held)
            if held:
                self._renew(held)

    def _wait_for_a_lease(self) -> None:
        with self._changed:
            if self._held:
                return
        connection.close()  # idle: no connection kept for renewals that may not come for hours
        with self._changed:
            self._changed.wait_for(lambda: self._held)

    def _renew(self, held: dict[int, Lease]) -> None:
        try:
            lost = renew(held.values())
        except Exception:
            logger.exception("the heartbeat failed; it tries again in a period")
            connection.close()  # a broken connection is not carried into the next renewal
            return
        with self._changed:
            for number, lease in held.items():
                # One its task let go of meanwhile was passed on, not taken over: no warning.
                if lease in lost and self._held.pop(number, None) is not None:
                    logger.warning("lease of %s was taken over", lease.run_id)


_heartbeat = Heartbeat()


def holding(lease: Lease) -> AbstractContextManager[None]:
    """Renew ``lease`` from the process's heartbeat thread while the block runs."""
    return _heartbeat.holding(lease)


def _forget_after_fork() -> None:
    # The child has the parent's leases and state but not its thread: start afresh.
    global _heartbeat
    _heartbeat = Heartbeat()


os.register_at_fork(after_in_child=_forget_after_fork)
