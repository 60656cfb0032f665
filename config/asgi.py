"""ASGI entry point (daphne): HTTP through Django; the inline runner's sweeper starts here."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.dev")

application = get_asgi_application()

from agent_core.runner import start_background  # noqa: E402  (needs the app registry)

start_background()
