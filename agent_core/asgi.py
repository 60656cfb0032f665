"""``application = with_airlock(get_asgi_application())``: the line a project's ``asgi.py`` adds.

It routes HTTP to Django (and, with ``DEBUG`` on, static files, as ``runserver`` does; the SSE
streams are Django views its ASGI handler streams), the views marked by :func:`asgi_view` to
their ASGI application, and WebSockets to the consumers the installed apps declare in their
``urls.py`` with :func:`websocket_view`, found by Django's own URL resolver, so a WebSocket
lives under the same prefix as the app's ``include()`` and ``reverse()`` gives its URL. With the
inline runner it starts the sweeper that runs the installed apps' sweep jobs (approvals expires
overdue requests) and re-drives runs whose driver died.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import Resolver404, ResolverMatch, resolve

from .engine.dispatch import start_background
from .startup import load_urlconf, settle

if TYPE_CHECKING:
    from django.core.handlers.asgi import ASGIHandler

ASGIApp = Callable[..., Any]


def websocket_view(consumer: Any) -> Callable[..., HttpResponse]:
    """A URL pattern's view for a WebSocket endpoint: the ASGI helper hands the connection to
    ``consumer`` (a Channels consumer class); a plain HTTP request gets 426."""
    refusal = {"code": "websocket_only", "detail": "Connect to this URL with a WebSocket."}
    return _handed_over(websocket_consumer=consumer.as_asgi(), refusal=refusal, status=426)


def asgi_view(app: ASGIApp) -> Callable[..., HttpResponse]:
    """A URL pattern's view for an endpoint served by an ASGI application of its own (the
    approvals MCP endpoint): ``with_airlock`` hands it the request; under WSGI it answers 404."""
    refusal = {"code": "not_found", "detail": "This endpoint is served by the ASGI application."}
    return _handed_over(asgi_app=app, refusal=refusal, status=404)


def _handed_over(
    *, refusal: dict[str, str], status: int, **marks: ASGIApp
) -> Callable[..., HttpResponse]:
    """A view Django never serves (it answers ``refusal``): ``marks`` tell the ASGI routers
    which application takes its requests."""

    def view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return JsonResponse(refusal, status=status)

    for name, app in marks.items():
        setattr(view, name, app)
    return view


def websocket_application() -> ASGIApp:
    """The WebSocket router, with the project's URLconf loaded now rather than by the first
    connection (importing every view takes a while, and would block the event loop)."""
    load_urlconf()
    return _route_websocket


def _resolve(scope: dict[str, Any]) -> ResolverMatch | None:
    path = scope["path"].removeprefix(scope.get("root_path", ""))
    try:
        return resolve(path)  # no database: safe on the event loop
    except Resolver404:
        return None


async def _route_websocket(scope: dict[str, Any], receive: Any, send: Any) -> None:
    # A WebSocket goes by the project's URLconf to the consumer of its websocket_view.
    match = _resolve(scope)
    consumer = getattr(match.func, "websocket_consumer", None) if match else None
    if match is None or consumer is None:
        await receive()  # the handshake; closing before accepting refuses it (HTTP 403)
        await send({"type": "websocket.close"})
        return
    scope = {**scope, "url_route": {"args": match.args, "kwargs": match.kwargs}}
    await consumer(scope, receive, send)


class AirlockApplication:
    """The ASGI application ``with_airlock`` returns (the system check looks for it).

    The inline runner's sweeper starts with the first event the server sends (lifespan startup
    under uvicorn or hypercorn, the first request under daphne), not at import: importing the
    project's asgi.py (``manage.py check`` does) has no side effects. So does the process's
    ``settle`` (``agent_core.startup``: the channel layer made, start-up frozen).
    """

    def __init__(self, router: ASGIApp) -> None:
        self.router = router
        self._started = False

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if not self._started:
            self._started = True
            start_background()  # starts a thread: nothing here blocks the event loop
            settle(_make_channel_layer)
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        await self.router(scope, receive, send)


def _make_channel_layer() -> None:
    # Now, not under the first streams to attach: importing its Redis client blocked the event
    # loop for ~0.2 s under the first of a thousand streams attaching at once (a restart's
    # reconnecting clients).
    from channels.layers import get_channel_layer

    get_channel_layer()


async def _lifespan(receive: Any, send: Any) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def with_airlock(
    django_app: ASGIHandler, *, serve_static: bool | None = None
) -> AirlockApplication:
    """The project's ASGI application with Airlock's WebSockets (and the inline sweeper).

    ``serve_static``: serve ``STATIC_URL`` through Django's staticfiles handler (default:
    ``DEBUG``, like ``runserver``); in production a web server, a CDN or WhiteNoise serves them.
    """
    # Imported here, not above: the project's asgi.py imports this module before
    # get_asgi_application() has set Django up, and these need the app registry.
    from channels.auth import AuthMiddlewareStack
    from channels.routing import ProtocolTypeRouter
    from channels.security.websocket import AllowedHostsOriginValidator
    from django.conf import settings
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    if serve_static is None:
        serve_static = settings.DEBUG
    http = _HttpRouter(ASGIStaticFilesHandler(django_app) if serve_static else django_app)
    websocket = AllowedHostsOriginValidator(AuthMiddlewareStack(websocket_application()))
    return AirlockApplication(ProtocolTypeRouter({"http": http, "websocket": websocket}))


class _HttpRouter:
    """HTTP: the views marked by ``asgi_view`` to their application, the rest to Django's."""

    def __init__(self, django_app: ASGIApp) -> None:
        self.django_app = django_app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        await self._route(scope, receive, send)

    def _route(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        # Apart from __call__: its frame lives as long as a stream, the ResolverMatch need not.
        match = _resolve(scope)
        app = getattr(match.func, "asgi_app", None) if match is not None else None
        if app is not None:
            return app(scope, receive, send)
        return self.django_app(scope, receive, send)
