"""The base of every Airlock API view: its DRF classes come from ``AGENT``, not the project.

A project's ``REST_FRAMEWORK`` (no token auth, another schema class, no exception handler, a
camel-case renderer) must not change how these endpoints answer, so each view declares its own
authentication, permission, schema, exception handler, renderers and parsers, as reusable apps do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.utils.module_loading import import_string
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import BasePermission
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from ..conf import agent_settings
from .parsers import LimitedJSONParser


def authenticators() -> list[BaseAuthentication]:
    """Instances of ``AGENT["API_AUTHENTICATION_CLASSES"]`` (the SSE view uses them too)."""
    return [import_string(path)() for path in agent_settings().API_AUTHENTICATION_CLASSES]


class _SchemaFromSettings:
    # A descriptor, as DRF's own ``schema`` attribute is: the class is read from AGENT when the
    # schema generator asks, never at import time.
    def __get__(self, instance: APIView | None, owner: type[APIView]) -> Any:
        inspector = import_string(agent_settings().API_SCHEMA_CLASS)()
        return inspector.__get__(instance, owner)


class AirlockAPIView(APIView):
    """``APIView`` whose DRF machinery is Airlock's whatever ``REST_FRAMEWORK`` says."""

    renderer_classes = [JSONRenderer, BrowsableAPIRenderer]
    # JSON only, size-limited: forms and multipart are refused with 415.
    parser_classes = [LimitedJSONParser]
    schema = _SchemaFromSettings()

    def get_authenticators(self) -> list[BaseAuthentication]:
        return authenticators()

    def get_permissions(self) -> list[BasePermission]:
        return [import_string(path)() for path in agent_settings().API_PERMISSION_CLASSES]

    def get_exception_handler(self) -> Callable[[Exception, dict[str, Any]], Response | None]:
        handler: Callable[[Exception, dict[str, Any]], Response | None] = import_string(
            agent_settings().API_EXCEPTION_HANDLER
        )
        return handler
