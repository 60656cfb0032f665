"""OpenTelemetry spans for runs, steps, model calls, tool executions and decisions (optional).

Off by default (``AGENT["TRACING"]``); off, every helper returns a shared no-op context manager
and ``opentelemetry`` is never imported. On (``pip install django-airlock[otel]`` and a tracer
provider configured by the project), spans follow the GenAI semantic conventions where they
apply (``invoke_agent``, ``chat``, ``execute_tool`` with ``gen_ai.*`` attributes).

A run lives for minutes or days across web processes and Celery workers, so its spans are tied
together by the run itself: every span of a run has, as its parent, a remote span context
derived from the run's id (the same trace id and parent span id on every process), and links to
whatever span was current where it started (the web request that approved, the worker's task).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from typing import Any, ParamSpec, TypeVar

from .conf import agent_settings

_OFF: AbstractContextManager[Any] = contextlib.nullcontext()
P = ParamSpec("P")
R = TypeVar("R")
T_ = TypeVar("T_")


def enabled() -> bool:
    """Whether ``AGENT["TRACING"]`` is on."""
    return agent_settings().TRACING


def run_trace_id(run_id: str) -> int:
    """The 128-bit trace id of a run's spans, on every process."""
    return int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:16], "big") or 1


def span(name: str, run_id: str, **attributes: Any) -> AbstractContextManager[Any]:
    """A span of ``run_id``'s trace (a no-op when tracing is off); yields the span."""
    if not agent_settings().TRACING:
        return _OFF
    return _span(name, run_id, attributes)


def event(name: str, run_id: str, **attributes: Any) -> None:
    """A span with no duration worth timing: something that happened to the run."""
    if agent_settings().TRACING:
        with _span(name, run_id, attributes):
            pass


@contextlib.contextmanager
def _span(name: str, run_id: str, attributes: dict[str, Any]) -> Iterator[Any]:
    from opentelemetry import trace

    digest = hashlib.sha256(run_id.encode()).digest()
    root = trace.SpanContext(
        trace_id=run_trace_id(run_id),
        span_id=int.from_bytes(digest[16:24], "big") or 1,
        is_remote=True,
        trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
    )
    current = trace.get_current_span().get_span_context()
    parent: Any = trace.set_span_in_context(trace.NonRecordingSpan(root))
    links = [trace.Link(current)] if current.is_valid else []
    if current.is_valid and current.trace_id == root.trace_id:
        parent, links = None, []  # nested in a span of this run already: a plain child
    tracer = trace.get_tracer("airlock")
    values = {"airlock.run_id": run_id, **{k: v for k, v in attributes.items() if v is not None}}
    with tracer.start_as_current_span(name, context=parent, links=links, attributes=values) as s:
        yield s


def step(fn: Callable[P, R]) -> Callable[P, R]:
    """Decorate the loop's ``take`` and ``take_and_open`` (``(lease, opened, …)``): one
    ``airlock.step`` span per step."""

    @functools.wraps(fn)
    def traced(*args: P.args, **kwargs: P.kwargs) -> R:
        if not agent_settings().TRACING:
            return fn(*args, **kwargs)
        lease, opened = args[0], args[1]
        kind = type(getattr(opened, "step", None)).__name__
        attempt = getattr(opened, "attempt", None)
        run_id = getattr(lease, "run_id", "")
        with _span("airlock.step", run_id, {"airlock.step.kind": kind, "airlock.attempt": attempt}):
            return fn(*args, **kwargs)

    return traced


def model_call(events: Iterable[T_], run_id: str, *, model: str, response: Any) -> Iterable[T_]:
    """A provider's stream, iterated inside a GenAI ``chat`` span when tracing is on; token usage
    is read from ``response`` (the loop's accumulator) once the stream has ended."""
    if not agent_settings().TRACING:
        return events
    return _model_call(events, run_id, model, response)


def _model_call(events: Iterable[T_], run_id: str, model: str, response: Any) -> Iterator[T_]:
    vendor, _, name = model.partition(":")
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": vendor,
        "gen_ai.request.model": name or model,
    }
    with _span(f"chat {name or model}", run_id, attributes) as current:
        yield from events
        current.set_attributes(
            {
                "gen_ai.usage.input_tokens": response.usage.input_tokens,
                "gen_ai.usage.output_tokens": response.usage.output_tokens,
                "gen_ai.response.finish_reasons": [response.finish_reason or "unknown"],
            }
        )


def tool_call(tool_name: str, tool_kind: str, ctx: Any) -> AbstractContextManager[Any]:
    """A GenAI ``execute_tool`` span around one tool execution."""
    return span(
        f"execute_tool {tool_name}",
        ctx.run_id,
        **{
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool_name,
            "gen_ai.tool.call.id": ctx.tool_call_id,
            "gen_ai.tool.type": "function",
            "airlock.tool.kind": tool_kind,
        },
    )


def _run_event(name: str) -> Callable[..., None]:
    def receiver(sender: Any, *, run: Any, **kwargs: Any) -> None:
        event(
            name.format(agent=run.agent),
            run.pk,
            **{
                "gen_ai.operation.name": "invoke_agent" if name.startswith("invoke") else None,
                "gen_ai.agent.name": run.agent,
                "airlock.run.status": run.status,
                "airlock.error_code": run.error_code or None,
            },
        )

    return receiver


def connect() -> None:
    """Record a span when a run starts and when it ends (from ``AgentCoreConfig.ready``)."""
    from . import signals

    signals.run_started.connect(
        _run_event("invoke_agent {agent}"), weak=False, dispatch_uid="tracing.started"
    )
    for name in ("run_finished", "run_failed", "run_cancelled"):
        getattr(signals, name).connect(
            _run_event("airlock.run.end"), weak=False, dispatch_uid=f"tracing.{name}"
        )
