"""Gunicorn's settings for the web processes of the production layout (README, "Run it in
production"): ``gunicorn mysite.wsgi -c python:agent_core.gunicorn --workers 4 --threads 8``.

Gunicorn reads the hooks below from this module; every other setting stays on the command line.
"""

from __future__ import annotations

from typing import Any

from .startup import load_urlconf, settle


def post_worker_init(worker: Any) -> None:
    """Once a worker has loaded the application (Django is set up): the URLconf loaded now, not
    by the first request, and start-up frozen out of the collector (``startup.settle``)."""
    settle(load_urlconf)
