"""The API's schema inspector: drf-spectacular's ``AutoSchema``, with every error status the API
can answer documented on every operation, as ``{code, detail, errors?}``.

Every path under ``/agent/`` answers its errors in that one JSON shape (``errors.py``), so the
schema says so once, here, rather than on each view; views still describe their successes and
may describe an error more precisely (``@extend_schema(responses={409: ...})``).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular import openapi
from drf_spectacular.utils import Direction, inline_serializer
from rest_framework import serializers

# Statuses any operation may answer (malformed input, no actor, not allowed, unknown, method,
# Accept, throttled); writes may also conflict, be gone, too large or of the wrong media type.
_ANY = {
    400: "malformed input: `{code, detail, errors}`",
    401: "no actor (see `WWW-Authenticate`)",
    403: "visible, but not yours to act on",
    404: "unknown, or not yours to see",
    405: "method not allowed",
    406: "no acceptable response media type",
    429: "throttled (see `Retry-After`)",
}
_WRITES = {
    409: "conflict: `run_active`, `already_decided`, `run_not_active`, …",
    410: "`approval_expired`",
    413: "`body_too_large`",
    415: "not JSON",
}


# Every error of the API: a stable ``code`` (SPEC §10), a ``detail`` for people. (Inline: a
# serializer class cannot declare a field named ``errors``.)
ERROR = inline_serializer(
    "Error",
    fields={
        "code": serializers.CharField(),
        "detail": serializers.JSONField(),
        "errors": serializers.JSONField(required=False, help_text="field errors of a 400"),
    },
)


class AutoSchema(openapi.AutoSchema):
    """drf-spectacular's schema generator, documenting the API's error responses everywhere."""

    def _get_response_bodies(self, direction: Direction = "response") -> dict[str, Any]:
        responses: dict[str, Any] = super()._get_response_bodies(direction)
        statuses = dict(_ANY) if self.method == "GET" else {**_ANY, **_WRITES}
        for status, description in statuses.items():
            documented = responses.get(str(status))
            if documented is not None and documented.get("content"):
                continue
            error = self._get_response_for_code(ERROR, str(status), direction=direction)
            error["description"] = (documented or {}).get("description") or description
            responses[str(status)] = error
        return responses
