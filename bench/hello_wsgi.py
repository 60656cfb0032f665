"""The approve benchmark's bare floor: a WSGI app with no Django, under the same gunicorn."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

BODY = b'{"outcome": "applied"}'


def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    """Read the request body and answer a small JSON body."""
    environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    headers = [("Content-Type", "application/json"), ("Content-Length", str(len(BODY)))]
    start_response("200 OK", headers)
    return [BODY]
