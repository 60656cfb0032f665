"""The base of every Airlock API view: its DRF classes come from ``AGENT``, not the project.

A project's ``REST_FRAMEWORK`` (no token auth, another schema class, no exception handler, a
camel-case renderer) must not change how these endpoints answer, so each view declares its own
authentication, permission, schema, exception handler, renderers and parsers, as reusable apps do.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from django.utils.module_loading import import_string
from drf_spectacular import utils as spectacular
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import BasePermission
from rest_framework.renderers import BaseRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from ..conf import agent_settings
from .parsers import LimitedJSONParser

F = TypeVar("F", bound=Callable[..., Any])


def extend_schema(**kwargs: Any) -> Callable[[F], F]:
    """drf-spectacular's ``extend_schema``, built on ``AGENT["API_SCHEMA_CLASS"]``.

    Theirs subclasses the project's ``DEFAULT_SCHEMA_CLASS`` when it decorates; DRF's own
    AutoSchema there breaks every decorated operation. Naming the base class on the method first
    is the hook drf-spectacular offers (it reads ``method.kwargs["schema"]``). This runs when the
    URLconf imports the views, once settings are configured.
    """

    def decorate(method: F) -> F:
        base = import_string(agent_settings().API_SCHEMA_CLASS)
        method.kwargs = {**getattr(method, "kwargs", {}), "schema": base}  # type: ignore[attr-defined]
        decorated: F = spectacular.extend_schema(**kwargs)(method)
        return decorated

    return decorate


@functools.cache
def _classes(paths: tuple[str, ...]) -> tuple[Any, ...]:
    # Imported once per process and setting: every request instantiates them.
    return tuple(import_string(path) for path in paths)


def authenticators() -> list[BaseAuthentication]:
    """Instances of ``AGENT["API_AUTHENTICATION_CLASSES"]`` (the SSE view uses them too)."""
    return [cls() for cls in _classes(agent_settings().API_AUTHENTICATION_CLASSES)]


class ConfiguredSchema:
    """A view's ``schema``: an ``AGENT["API_SCHEMA_CLASS"]`` inspector.

    A data descriptor, as DRF's own ``schema`` attribute is: the class is read from AGENT when
    the schema generator asks, never at import time, and each view instance keeps its inspector
    (or the one the generator sets, which must learn its view).
    """

    def __get__(self, instance: APIView | None, owner: type[APIView]) -> Any:
        if instance is not None and "schema" in instance.__dict__:
            return instance.__dict__["schema"]
        inspector = import_string(agent_settings().API_SCHEMA_CLASS)()
        if instance is not None:
            self.__set__(instance, inspector)
        return inspector

    def __set__(self, instance: APIView, inspector: Any) -> None:
        instance.__dict__["schema"] = inspector
        if inspector is not None:
            inspector.view = instance


class AirlockAPIView(APIView):
    """``APIView`` whose DRF machinery is Airlock's whatever ``REST_FRAMEWORK`` says."""

    # JSON only, size-limited: forms and multipart are refused with 415.
    parser_classes = [LimitedJSONParser]
    schema = ConfiguredSchema()

    def get_authenticators(self) -> list[BaseAuthentication]:
        return authenticators()

    def get_renderers(self) -> list[BaseRenderer]:
        # ``AGENT["API_RENDERER_CLASSES"]``: JSON only unless the project opts in (the
        # browsable API is an HTML page of the API, its forms included).
        return [cls() for cls in _classes(agent_settings().API_RENDERER_CLASSES)]

    def perform_content_negotiation(self, request: Any, force: bool = False) -> Any:
        # A client asking for what no renderer makes (a browser's text/html) is answered with
        # the first renderer, JSON, not a 406 before its credentials are even read (SPEC §8).
        return super().perform_content_negotiation(request, force=True)

    def get_permissions(self) -> list[BasePermission]:
        return [cls() for cls in _classes(agent_settings().API_PERMISSION_CLASSES)]

    def get_exception_handler(self) -> Callable[[Exception, dict[str, Any]], Response | None]:
        (handler,) = _classes((agent_settings().API_EXCEPTION_HANDLER,))
        return handler
