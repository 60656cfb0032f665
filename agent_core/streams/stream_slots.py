"""How many streams one actor follows at once (``AGENT["MAX_STREAMS_PER_ACTOR"]``, per process).

Each stream of a run (SSE, the UI message stream, the run's WebSocket) takes a
slot of its actor when it attaches; past the cap it is refused with 429 ``too_many_streams``
(a WebSocket's handshake closes with 4429). A slot is held by the ``Run`` object the stream
follows, which lives exactly as long as the stream, and freed when that object goes: a stream
that ends, fails or loses its client frees it, whichever way it went.

Counted per process, as the streams' resources are: a deployment of N streams processes lets
one actor hold up to N times the cap.
"""

from __future__ import annotations

import threading
import weakref
from collections import Counter

from ..actors import Actor
from ..conf import agent_settings
from ..exceptions import TooManyStreams
from ..models import Run

STREAM_RETRY_SECONDS = 5  # when a stream will end is unknown: a short, honest guess
# Streams attach on reader threads; a slot is freed wherever its run object is collected.
_lock = threading.Lock()
_open: Counter[str] = Counter()


def hold(actor: Actor, run: Run) -> None:
    """Take one of ``actor``'s slots for the stream that follows ``run`` (this object), until it
    is collected; ``TooManyStreams`` at the cap."""
    limit = agent_settings().MAX_STREAMS_PER_ACTOR
    with _lock:
        if _open[actor.ref] >= limit:
            raise TooManyStreams(
                f"at most {limit} streams at once: close one first",
                retry_after=STREAM_RETRY_SECONDS,
            )
        _open[actor.ref] += 1
    weakref.finalize(run, _free, actor.ref)


def held(actor: Actor) -> int:
    """How many streams ``actor`` follows in this process."""
    with _lock:
        return _open[actor.ref]


def _free(ref: str) -> None:
    with _lock:
        _open[ref] -= 1
        if _open[ref] <= 0:
            del _open[ref]
