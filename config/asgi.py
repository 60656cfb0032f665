"""ASGI entry point (daphne): HTTP through Django, WebSockets through Channels; the inline
runner's sweeper starts here."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.dev")

django_asgi = get_asgi_application()

# Everything below needs the app registry.
from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from agent_core.routing import websocket_urlpatterns as agent_ws  # noqa: E402
from agent_core.runner import start_background  # noqa: E402
from console.routing import websocket_urlpatterns as console_ws  # noqa: E402

# daphne serves no static files: in development (DEBUG) or when SERVE_STATIC=1 (the browser
# tests), Django's staticfiles handler serves them; in production a web server or CDN does.
serve_static = settings.DEBUG or os.environ.get("SERVE_STATIC") == "1"
http = ASGIStaticFilesHandler(django_asgi) if serve_static else django_asgi

application = ProtocolTypeRouter(
    {
        "http": http,
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter([*agent_ws, *console_ws]))
        ),
    }
)

start_background()
