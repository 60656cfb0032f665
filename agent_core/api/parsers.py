"""The one JSON parser of the API: refuses oversized bodies before reading them whole, and
documents PostgreSQL could not store (a NUL character) or Python could not walk (deep nesting)."""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

from rest_framework import status
from rest_framework.exceptions import APIException, ParseError
from rest_framework.parsers import JSONParser

from ..conf import agent_settings
from ..engine import jsonsafe


class BodyTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is too large."
    default_code = "body_too_large"


class LimitedJSONParser(JSONParser):
    """``JSONParser`` that answers 413 above ``AGENT["MAX_BODY_BYTES"]`` and 400 for a body
    holding a NUL character or nested deeper than ``jsonsafe.MAX_DEPTH``."""

    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        limit = agent_settings().MAX_BODY_BYTES
        body = stream.read(limit + 1) if stream is not None else b""
        if len(body) > limit:
            raise BodyTooLarge(f"The request body is larger than {limit} bytes.")
        try:
            data = super().parse(io.BytesIO(body), media_type, parser_context)
        except RecursionError as exc:
            raise ParseError("JSON parse error - nested too deeply") from exc
        unstorable = jsonsafe.problem(data)
        if unstorable is not None:
            raise ParseError(f"JSON parse error - {unstorable}")
        return data
