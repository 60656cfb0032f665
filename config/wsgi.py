"""WSGI entry point (gunicorn): the web processes of the production layout (README, "Run it in
production"): the REST API and the console; streams and WebSockets go to the ASGI app."""

from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.dev")

application = get_wsgi_application()
