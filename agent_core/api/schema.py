"""The OpenAPI schema (``/agent/schema/``) and its interactive docs (``/agent/docs/``).

The SSE streams' operations come from the generator (``generator.py``). The docs page is Swagger
UI from ``drf-spectacular-sidecar``: no CDN, it works offline. The inspector that documents
every error of every operation is ``openapi.py``.
"""

from __future__ import annotations

from typing import Any

from django.templatetags.static import static
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.request import Request
from rest_framework.response import Response

from .base import ConfiguredSchema, extend_schema
from .generator import AirlockSchemaGenerator


class SchemaView(SpectacularAPIView):
    """``GET /agent/schema/``: the OpenAPI document of the API, SSE stream included."""

    generator_class = AirlockSchemaGenerator
    # Not the project's DEFAULT_SCHEMA_CLASS, which drf-spectacular's own views take: a project
    # using DRF's AutoSchema breaks them (a 500 "Incompatible AutoSchema").
    schema = ConfiguredSchema()

    @extend_schema(exclude=True)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)


class DocsView(SpectacularSwaggerView):
    """``GET /agent/docs/``: Swagger UI over the schema, its assets served as static files."""

    schema = ConfiguredSchema()

    @extend_schema(exclude=True)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    @staticmethod
    def _swagger_ui_resource(filename: str) -> str:
        return static(f"drf_spectacular_sidecar/swagger-ui-dist/{filename}")

    @staticmethod
    def _swagger_ui_favicon() -> str:
        return static("drf_spectacular_sidecar/swagger-ui-dist/favicon-32x32.png")
