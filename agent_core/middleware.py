"""``ServiceUnavailableMiddleware``: a page whose view found PostgreSQL or Redis away answers 503
with ``Retry-After``, never a 500 with a traceback (SPEC §20).

The REST API's views answer the same through their exception handler (``api.errors``); this
covers the views outside it: the console, the decision links, the admin.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse

from .engine import outages
from .exceptions import ServiceUnavailable

logger = logging.getLogger(__name__)


class ServiceUnavailableMiddleware:
    """Turns an exception that says a service is away (``outages.service_away``) into a 503."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not outages.service_away(exception):
            return None
        logger.warning("a service is away: %r", exception)
        away = ServiceUnavailable(retry_after=outages.RETRY_AFTER_SECONDS)
        response = JsonResponse({"code": away.code, "detail": away.message}, status=503)
        response["Retry-After"] = str(away.retry_after)
        return response
