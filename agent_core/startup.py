"""A long-lived process's start-up, finished before its first work: ``settle``."""

from __future__ import annotations

import gc
from collections.abc import Callable

from django.urls import get_resolver


def settle(*warm: Callable[[], object]) -> None:
    """Call each of ``warm`` (start-up work that would otherwise fall on the first requests or
    streams), then freeze what start-up loaded out of CPython's garbage collector.

    Start-up leaves ~150,000-160,000 objects (modules, classes, the URLconf) in the collector's
    oldest generation, and every full collection walks them all again: in a web worker about once
    every thousand console pages, a pause of 90-500 ms in the request that sets it off; in a
    streams process several times while a thousand streams attach (they add ~100,000 objects that
    live as long as their stream), pauses of up to ~1 s (bench/README.md, "the console's inbox at
    1M calls: the process", "Attaching 1,000 streams"). Frozen (``gc.freeze``), a full collection
    walks only what came after. The web workers settle with ``agent_core.gunicorn``'s hook, the
    streams processes at the ASGI application's first event (``agent_core.asgi``).
    """
    for work in warm:
        work()
    gc.collect()  # what start-up left as garbage is not frozen with the rest
    gc.freeze()


def load_urlconf() -> object:
    """The project's URLconf, loaded now: it imports every view, which takes a while."""
    return get_resolver().url_patterns
