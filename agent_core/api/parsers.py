"""A JSON parser that refuses oversized bodies before reading them whole."""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

from rest_framework import status
from rest_framework.exceptions import APIException
from rest_framework.parsers import JSONParser

from ..conf import agent_settings


class BodyTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is too large."
    default_code = "body_too_large"


class LimitedJSONParser(JSONParser):
    """``JSONParser`` that answers 413 above ``AGENT["MAX_BODY_BYTES"]``."""

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
        return super().parse(io.BytesIO(body), media_type, parser_context)
