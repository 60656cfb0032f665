"""Capturing OpenTelemetry spans in tests: the SDK's in-memory exporter in this process, and a
JSON-lines file for the worker processes a test starts (``AIRLOCK_TEST_SPANS_FILE``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

_memory: InMemorySpanExporter | None = None


def in_memory() -> InMemorySpanExporter:
    """This process's exporter (the global tracer provider is set once per process)."""
    global _memory
    if _memory is None:
        _memory = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_memory))
        trace.set_tracer_provider(provider)
    return _memory


class FileExporter(SpanExporter):
    """One JSON line per span: name, trace id, attributes."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self.path.open("a") as out:
            for s in spans:
                out.write(json.dumps(as_dict(s)) + "\n")
        return SpanExportResult.SUCCESS


def export_to_file(path: str) -> None:
    """Install a tracer provider writing every span to ``path`` (a worker's settings call it)."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileExporter(path)))
    trace.set_tracer_provider(provider)


def as_dict(s: ReadableSpan) -> dict[str, Any]:
    assert s.context is not None
    return {
        "name": s.name,
        "scope": s.instrumentation_scope.name if s.instrumentation_scope else "",
        "trace_id": s.context.trace_id,
        "attributes": dict(s.attributes or {}),
    }


def read_file(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]
