"""Every API error is JSON ``{"code": ..., "detail": ...}`` with the status SPEC §8 gives it.

A domain error answers the ``status_code`` its class carries (``agent_core.exceptions``), as the
console and the decision links do.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from django.core.exceptions import PermissionDenied, RequestDataTooBig, SuspiciousOperation
from django.http import Http404, HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions, status
from rest_framework.response import Response

from ..conf import agent_settings
from ..engine import outages
from ..exceptions import AgentCoreError, RetryAfter, ServiceUnavailable

logger = logging.getLogger(__name__)

# The scheme a 401 names when no authenticator of the view names one (session login has none).
DEFAULT_AUTHENTICATE_HEADER = "Token"


def error_response(code: str, detail: Any, http_status: int, **extra: Any) -> Response:
    return Response({"code": code, "detail": detail, **extra}, status=http_status)


def authenticate_header(request: Any) -> str:
    """The ``WWW-Authenticate`` value of a 401: the first the request's authenticators give."""
    for authenticator in getattr(request, "authenticators", None) or ():
        header = authenticator.authenticate_header(request)
        if header:
            return str(header)
    return DEFAULT_AUTHENTICATE_HEADER


def not_authenticated(request: Any, detail: str) -> Response:
    """401 ``not_authenticated`` with its ``WWW-Authenticate`` header (RFC 9110 §15.5.2)."""
    response = error_response("not_authenticated", detail, status.HTTP_401_UNAUTHORIZED)
    response["WWW-Authenticate"] = authenticate_header(request)
    return response


@csrf_exempt
def not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    """Every path under the API's prefix that no view claims, whatever the method: JSON 404."""
    return JsonResponse({"code": "not_found", "detail": "No such endpoint."}, status=404)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's ``EXCEPTION_HANDLER``: domain errors and DRF errors alike get a stable code."""
    if isinstance(exc, AgentCoreError):
        extra = {"errors": exc.errors} if exc.errors is not None else {}
        response = error_response(exc.code, exc.message, exc.status_code, **extra)
        if isinstance(exc, RetryAfter):
            response["Retry-After"] = str(exc.retry_after)
        return response
    if isinstance(exc, Http404):
        return error_response("not_found", "Not found.", status.HTTP_404_NOT_FOUND)
    if isinstance(exc, RequestDataTooBig):  # over Django's DATA_UPLOAD_MAX_MEMORY_SIZE
        return error_response(
            "body_too_large",
            "The request body is too large.",
            status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    if isinstance(exc, SuspiciousOperation):
        return error_response("invalid", "The request is malformed.", status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, PermissionDenied):
        return error_response("forbidden", "You may not do this.", status.HTTP_403_FORBIDDEN)
    if isinstance(exc, exceptions.ValidationError):
        return error_response(
            "invalid", "The request body is invalid.", exc.status_code, errors=exc.detail
        )
    if isinstance(exc, exceptions.APIException):
        code = exc.default_code if isinstance(exc.default_code, str) else "error"
        if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
            return not_authenticated(context.get("request"), str(exc.detail))
        response = error_response(code, str(exc.detail), exc.status_code)
        wait = getattr(exc, "wait", None)  # Throttled's (missing from the stubs)
        if isinstance(exc, exceptions.Throttled) and wait is not None:
            response["Retry-After"] = str(math.ceil(wait))
        return response
    if outages.service_away(exc):
        logger.warning("a service is away: %r", exc)
        away = ServiceUnavailable(retry_after=outages.RETRY_AFTER_SECONDS)
        return exception_handler(away, context)
    logger.exception("unhandled API error", exc_info=exc)
    detail = repr(exc) if agent_settings().expose_error_details else "Internal server error."
    return error_response("server_error", detail, status.HTTP_500_INTERNAL_SERVER_ERROR)
