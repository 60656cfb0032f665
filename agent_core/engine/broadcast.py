"""Fire-and-forget sends to the channel layer from synchronous code, through one event loop.

``async_to_sync(layer.group_send)`` from a driver's thread builds an event loop, and with it a
Redis connection, for every call (~9 ms each, ten per approval cycle). Here one daemon thread per
process owns an event loop, and so the channel layer's connection pool for that loop; callers queue
a message and return at once. Messages leave in the order they were queued, one at a time, so a
run's frames reach Redis in ``seq`` order; messages that say they merge, queued together for one
group (a run's frames from the several statements of one commit, the console's events of several
runs under load), leave as one (``merge``): one Redis write instead of several. Delivery stays
best effort, as before: a send that fails is logged, and every reader can fall back to the
table.

The state is rebuilt in a forked child (Celery's prefork pool): the thread does not survive a
fork. At interpreter exit, what is queued is flushed for a moment before the process ends.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import threading
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, TypeAlias

from channels.layers import get_channel_layer

logger = logging.getLogger(__name__)

EXIT_FLUSH_SECONDS = 2.0


# A message queued for a group: (group, message, the name of its list that merges, or ``""``).
Queued: TypeAlias = tuple[str, dict[str, Any], str]


@dataclass
class _Sender:
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue[Queued]
    thread: threading.Thread


_sender: _Sender | None = None
_lock = threading.Lock()


def send(group: str, message: dict[str, Any], *, merge: str = "") -> None:
    """Queue ``message`` for ``group`` on the channel layer; returns without waiting.

    ``merge``: the name of the message's list of items; the group's messages of the same type
    queued just before or after it leave with it, as one message of all their items in order
    (its consumer takes a list)."""
    if get_channel_layer() is None:
        return
    sender = _get_sender()
    try:
        sender.loop.call_soon_threadsafe(sender.queue.put_nowait, (group, message, merge))
    except RuntimeError:  # the loop is gone: the interpreter is shutting down
        logger.warning("could not queue a message for %s: no event loop", group)


def flush(timeout: float = 5.0) -> bool:
    """Wait until every message queued so far has been handed to the layer; ``False`` on timeout."""
    sender = _sender
    if sender is None or not sender.thread.is_alive():
        return True
    try:
        asyncio.run_coroutine_threadsafe(sender.queue.join(), sender.loop).result(timeout)
    except (FutureTimeout, RuntimeError):
        return False
    return True


def _get_sender() -> _Sender:
    global _sender
    with _lock:
        if _sender is None:
            loop = asyncio.new_event_loop()
            ready = threading.Event()
            holder: list[asyncio.Queue[Queued]] = []

            def run() -> None:
                asyncio.set_event_loop(loop)
                queue: asyncio.Queue[Queued] = asyncio.Queue()
                holder.append(queue)
                ready.set()
                loop.run_until_complete(_drain(queue))  # never returns

            thread = threading.Thread(target=run, name="airlock-broadcast", daemon=True)
            thread.start()
            ready.wait()
            _sender = _Sender(loop, holder[0], thread)
        return _sender


async def _drain(queue: asyncio.Queue[Queued]) -> None:
    while True:
        batch = [await queue.get()]
        while not queue.empty():  # what else is queued now: frames of one commit come together
            batch.append(queue.get_nowait())
        try:
            layer = get_channel_layer()
            for group, message in merge(batch):
                try:
                    if layer is not None:
                        await layer.group_send(group, message)
                except Exception:
                    logger.warning("could not send a message to %s", group, exc_info=True)
        finally:
            for _ in batch:
                queue.task_done()


def merge(batch: list[Queued]) -> list[tuple[str, dict[str, Any]]]:
    """``batch`` with each group's merging messages of one type that follow one another in it
    (nothing else for that group between them) as one: one Redis write instead of several.
    Every group's messages keep their order."""
    merged: list[tuple[str, dict[str, Any]]] = []
    # Each group's last message in ``merged``, with its type and the name of its list that merges.
    last: dict[str, tuple[dict[str, Any], str, str]] = {}
    for group, message, items in batch:
        previous = last.get(group)
        if items and previous is not None and previous[1:] == (message["type"], items):
            kept = previous[0]
            kept[items] = [*kept[items], *message[items]]
            continue
        message = dict(message)
        merged.append((group, message))
        last[group] = message, message["type"], items
    return merged


def _forget_after_fork() -> None:
    # The child has the parent's state but not its thread: start afresh on first use.
    global _sender, _lock
    _sender = None
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)
atexit.register(flush, EXIT_FLUSH_SECONDS)
