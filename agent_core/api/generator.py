"""The OpenAPI document's generator: drf-spectacular's, plus the SSE streams' operations.

The SSE streams are plain async Django views, which drf-spectacular cannot see, so the generator
adds their operations by hand. ``SPECTACULAR_SETTINGS["DEFAULT_GENERATOR_CLASS"]`` names it, so that
``manage.py spectacular`` writes them too; it lives apart from the schema's views, which read that
setting when they are defined.
"""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from drf_spectacular.generators import SchemaGenerator

_ERROR = {
    "type": "object",
    "properties": {"code": {"type": "string"}, "detail": {"type": "string"}},
    "required": ["code", "detail"],
}


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ERROR}}}


# Each event's data is a JSON object (a frame of SPEC §9, or `meta` / `done` / `error`; a chunk of
# the AI SDK's UI message stream); clients ignore kinds they do not know, so the schema is open.
EVENT_SCHEMA: dict[str, Any] = {"type": "object", "additionalProperties": True}

_FRAME_NUMBER = {"type": "integer", "minimum": 0, "maximum": 999_999_999_999}

STREAM_OPERATION: dict[str, Any] = {
    "operationId": "chat_stream",
    "summary": "Follow a run live (server-sent events)",
    "description": (
        "Replays the run's frames after the client's last one, then follows the run live. "
        "Frames carry `id:` (their number); `meta`, `done` and `error` are named events; "
        "`: keep-alive` comments keep idle connections open. Reattach with `?after=<last id>` "
        "or the `Last-Event-ID` header (the query wins)."
    ),
    "tags": ["chat"],
    "parameters": [
        {"name": "run_id", "in": "path", "required": True, "schema": {"type": "string"}},
        {
            "name": "after",
            "in": "query",
            "required": False,
            "description": "Send the frames after this number (default 0: all of them).",
            "schema": _FRAME_NUMBER,
        },
        {
            "name": "Last-Event-ID",
            "in": "header",
            "required": False,
            "description": "What a reconnecting EventSource sends; `after` wins when both are.",
            "schema": _FRAME_NUMBER,
        },
    ],
    "responses": {
        "200": {
            "description": "The event stream; it ends after a `done` or `error` event.",
            "content": {"text/event-stream": {"schema": EVENT_SCHEMA}},
        },
        "400": _error("`invalid`: `after` / `Last-Event-ID` is not a frame number"),
        "401": _error("`not_authenticated`: no actor"),
        "404": _error("`not_found`: unknown run, or not yours to see"),
        "405": _error("`method_not_allowed`: only GET"),
    },
}


UI_STREAM_OPERATION: dict[str, Any] = {
    **STREAM_OPERATION,
    "operationId": "chat_ui_stream",
    "summary": "Follow a run in the Vercel AI SDK's UI message stream protocol",
    "description": (
        "The same frames as the stream, as UI message chunks (`data:` lines of JSON, header "
        "`x-vercel-ai-ui-message-stream: v1`), ending with `data: [DONE]`. Reattach as on the "
        "stream: `?after=<last id>` or `Last-Event-ID`."
    ),
    "responses": {
        **STREAM_OPERATION["responses"],
        "200": {
            "description": "The UI message stream; it ends with `data: [DONE]`.",
            "content": {"text/event-stream": {"schema": EVENT_SCHEMA}},
        },
    },
}

# Async (SSE) views of any Airlock app, which drf-spectacular cannot see: URL name → operation,
# the path's one parameter named by the operation's first parameter.
SSE_OPERATIONS: dict[str, dict[str, Any]] = {
    "agent_core_api:chat-stream": STREAM_OPERATION,
    "agent_core_api:chat-ui-stream": UI_STREAM_OPERATION,
}


class AirlockSchemaGenerator(SchemaGenerator):
    """drf-spectacular's generator plus the SSE streams' operations (``SSE_OPERATIONS``)."""

    def parse(self, input_request: Any, public: bool) -> dict[str, Any]:
        paths: dict[str, Any] = super().parse(input_request, public)
        marker = "PATH-PARAMETER-PLACEHOLDER"
        for name, operation in SSE_OPERATIONS.items():
            parameter = operation["parameters"][0]["name"]
            path = reverse(name, args=[marker]).replace(marker, "{" + parameter + "}")
            paths[path] = {"get": operation}
        return paths
