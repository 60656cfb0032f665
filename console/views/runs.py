"""Runs: the list with filters, and a run's page (transcript, steps, calls, live stream)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404

from agent_core.models import Run, Step, StreamFrame, ToolCall
from approvals.models import DecisionAttempt

from ..access import console_view
from ..conf import console_settings
from ..forms import RunFilterForm
from ..people import ref_of
from .common import fragment, page


def _filtered(runs: QuerySet[Run], filters: dict[str, Any]) -> QuerySet[Run]:
    if filters.get("status"):
        runs = runs.filter(status=filters["status"])
    if filters.get("agent"):
        runs = runs.filter(agent=filters["agent"])
    if filters.get("actor"):
        runs = runs.filter(actor_ref=ref_of(filters["actor"]))
    if filters.get("thread"):
        runs = runs.filter(thread_id=filters["thread"])
    return runs


@console_view
def runs(request: HttpRequest) -> HttpResponse:
    """Every run, newest first, filterable by status, agent, actor and thread."""
    form = RunFilterForm(request.GET)
    filters = form.cleaned_data if form.is_valid() else {}
    qs = _filtered(Run.objects.select_related("thread").order_by("-created_at"), filters)
    paginator = Paginator(qs, console_settings().PAGE_SIZE)
    return page(
        request,
        "console/runs.html",
        {
            "filter_form": form,
            "page_obj": paginator.get_page(request.GET.get("page")),
            "filtered": any(filters.values()),
            "query": _query_without_page(request),
        },
    )


def _query_without_page(request: HttpRequest) -> str:
    query = request.GET.copy()
    query.pop("page", None)
    return query.urlencode()


def _run_context(run_id: str) -> dict[str, Any]:
    run = get_object_or_404(Run.objects.select_related("thread"), pk=run_id)
    steps = list(run.steps.order_by("started_at"))
    calls = list(run.tool_calls.order_by("requested_at", "position"))
    attempts = DecisionAttempt.objects.filter(run_id=run.pk).order_by("created_at")
    frames = list(StreamFrame.objects.filter(run=run).order_by("seq"))
    by_call: dict[str, list[DecisionAttempt]] = {}
    for attempt in attempts:
        by_call.setdefault(attempt.tool_call_id, []).append(attempt)
    return {
        "run": run,
        "transcript": list(run.messages.order_by("seq")),
        "steps": [{"step": s, "took": _took(s, calls)} for s in steps],
        "calls": [{"call": c, "attempts": by_call.get(c.pk, [])} for c in calls],
        "frames": frames,
        "last_seq": frames[-1].seq if frames else 0,
    }


def _took(step: Step, calls: list[ToolCall]) -> timedelta | None:
    # A tool step's row is written when the tool finished: its call holds the real span.
    if step.name.startswith("tool:"):
        call = next((c for c in calls if step.name == f"tool:{c.pk}"), None)
        if call is not None and call.started_at and call.finished_at:
            return call.finished_at - call.started_at
        return None
    return step.finished_at - step.started_at if step.finished_at else None


@console_view
def run(request: HttpRequest, run_id: str) -> HttpResponse:
    """One run: its transcript, step timeline, tool calls with their approval records, stream."""
    return page(request, "console/run.html", _run_context(run_id))


@console_view
def run_fragment(request: HttpRequest, run_id: str) -> HttpResponse:
    """The run's details alone, fetched by the page when the run moved on."""
    return fragment(request, "console/partials/run_details.html", _run_context(run_id))
