"""Gunicorn's settings for the web processes of the production layout (README, "Run it in
production"): ``gunicorn mysite.wsgi -c python:agent_core.gunicorn --workers 4 --threads 8``.

Gunicorn reads the hooks below from this module; every other setting stays on the command line.
"""

from __future__ import annotations

import gc
from typing import Any


def post_worker_init(worker: Any) -> None:
    """Once a worker has loaded the application (Django is set up): ``settle``."""
    settle()


def settle() -> None:
    """Start-up work that would otherwise fall on a worker's first requests, and start-up's
    objects out of the collector's way.

    The URLconf is loaded now (it imports every view), not by the first request. Then what
    start-up loaded (~160,000 objects: modules, classes, the URLconf) is frozen out of CPython's
    collector: left in its oldest generation, every full collection walks them all again, about
    once every thousand console pages, a pause of 90-500 ms on this 2-core machine in the request
    that sets it off (bench/README.md, "the console's inbox at 1M calls: the process"). Frozen,
    a full collection walks only what requests left behind since (the benchmark's longest
    collection of any generation then: 3-29 ms). The streams processes do the same
    (``agent_core.asgi.settle``).
    """
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018
    gc.collect()  # what start-up left as garbage is not frozen with the rest
    gc.freeze()
