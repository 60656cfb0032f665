"""ASGI entry point (daphne): the project's Django app with Airlock's WebSockets and sweeper."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

from agent_core.asgi import with_airlock

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.dev")

# Static files as runserver serves them (DEBUG, `make demo`), and for the browser tests
# (SERVE_STATIC=1, DEBUG off); in production a web server, a CDN or WhiteNoise serves them.
application = with_airlock(
    get_asgi_application(), serve_static=os.environ.get("SERVE_STATIC") == "1" or None
)
