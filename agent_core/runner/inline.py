"""The inline runner: steps run on a bounded thread pool of this process; no broker.

Restart-safe for parked runs (a decision re-drives them from the database) and, through the
sweeper thread, for runs a dead process left mid-step: their lease expires and they are re-driven.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from django.db import close_old_connections

from ..conf import agent_settings
from ..engine.dispatch import NextStep
from ..engine.leases import Claim, Lease, hand_off, renew, renewal_period
from ..exceptions import LeaseLost
from . import loop
from .model_step import RetryLater
from .sweep import sweep

logger = logging.getLogger(__name__)


class InlineRunner:
    """Drives runs on ``workers`` threads (0: synchronously in the dispatching thread)."""

    def __init__(self, *, workers: int | None = None, owner: str | None = None) -> None:
        self.workers = agent_settings().INLINE_WORKERS if workers is None else workers
        self.owner = owner or f"inline:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._pool = ThreadPoolExecutor(self.workers) if self.workers else None
        self._held: dict[str, Lease] = {}
        self._held_lock = threading.Lock()
        self._stop = threading.Event()
        self._background: threading.Thread | None = None

    def dispatch(self, run_id: str, kind: NextStep | None = None) -> None:
        if self._pool is None:
            self.drive(run_id)
        else:
            future: Future[None] = self._pool.submit(self._drive_in_thread, run_id)
            future.add_done_callback(_log_crash)

    def submit(self, fn: Callable[[], object]) -> None:
        """Run ``fn`` on this runner's pool (synchronously without one), with a fresh connection:
        work that follows a commit without holding up the committing thread (notifications)."""
        if self._pool is None:
            fn()
        else:
            self._pool.submit(_with_connection, fn).add_done_callback(_log_crash)

    def _drive_in_thread(self, run_id: str) -> None:
        _with_connection(lambda: self.drive(run_id))

    def drive(self, run_id: str) -> None:
        """Take the run's lease (in the transaction that opens its first step) and take step after
        step until the run parks, ends or the lease is lost."""
        found = loop.claim_step(Claim(run_id, self.owner))
        if found is None:
            return
        lease, opening = found
        with self._held_lock:
            self._held[run_id] = lease
        try:
            while not self._stop.is_set():
                match opening:
                    case loop.Opened() as opened:
                        try:
                            # The step's record opens the next one (one commit, not two).
                            opening = loop.take_and_open(lease, opened)
                        except RetryLater as retry:
                            time.sleep(retry.delay)
                            opening = NextStep.MODEL  # open the model step again: a new attempt
                        except LeaseLost:
                            logger.warning("lost the lease of %s; another driver has it", run_id)
                            return
                    case NextStep.STOP:
                        return  # parked or ended: the lease went with it
                    case _:  # MODEL or TOOL (never OtherQueue: no ``only``): nothing opened
                        opening = loop.open_step(lease)
            hand_off(lease)  # shutting down: another driver may take the run at once
        finally:
            with self._held_lock:
                self._held.pop(run_id, None)

    def start(self) -> None:
        """Start the background thread: heartbeat the held leases, sweep now and periodically."""
        if self._background is None:
            self._background = threading.Thread(
                target=self._maintain, name="airlock-inline-sweeper", daemon=True
            )
            self._background.start()

    def shutdown(self, *, wait: bool = True) -> None:
        self._stop.set()
        if self._pool is not None:
            self._pool.shutdown(wait=wait)
        if self._background is not None and wait:
            self._background.join()

    def _maintain(self) -> None:
        settings = agent_settings()
        beat = renewal_period()
        next_sweep = 0.0
        while not self._stop.is_set():
            close_old_connections()
            try:
                with self._held_lock:
                    held = list(self._held.values())
                for lease in renew(held):
                    logger.warning("lease of %s was taken over", lease.run_id)
                if time.monotonic() >= next_sweep:
                    sweep(self)
                    next_sweep = time.monotonic() + settings.SWEEP_SECONDS
            except Exception:
                logger.exception("inline runner maintenance failed; retrying")
            self._stop.wait(min(beat, settings.SWEEP_SECONDS))
        close_old_connections()


def _with_connection(fn: Callable[[], object]) -> None:
    close_old_connections()
    try:
        fn()
    finally:
        close_old_connections()


def _log_crash(future: Future[None]) -> None:
    if (exc := future.exception()) is not None:
        logger.error("inline driver crashed", exc_info=exc)
