"""Runs: the list with filters, a run's page (transcript, steps, calls, live stream), Cancel,
and "Fork from here" on each message of its thread (SPEC §16,
``agent_core.conversation.history.fork``).

Who may cancel is the one rule of every surface (``agent_core.engine.access.check_may_cancel``):
the thread's owner or an ``AGENT["OPERATOR_ROLE"]`` holder.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from agent_core.actors import Actor
from agent_core.choices import RunStatus
from agent_core.conversation import history
from agent_core.engine.access import check_may_cancel, visible_runs, visible_threads
from agent_core.engine.cancel import request_cancel
from agent_core.exceptions import NotAllowed, NotFound
from agent_core.models import Run, Step, StreamFrame, ToolCall
from approvals.models import DecisionAttempt, Delivery

from ..access import console_view
from ..filters import RunsFilter, filtered, is_filtered, newest_first
from .common import actor_of, fragment, page


@console_view
def runs(request: HttpRequest) -> HttpResponse:
    """Every run the user may see (the API's rule), newest first, filtered by the API's
    ``RunFilter`` (status, agent, thread) and the actor."""
    actor = actor_of(request)
    filters = RunsFilter(request.GET, queryset=visible_runs(actor).select_related("thread"))
    listed = newest_first(filtered(filters), request)
    return page(
        request,
        "console/runs.html",
        {
            **listed,
            "filter_form": filters.form,
            "cancellable": {r.pk for r in listed["results"].rows if _may_cancel(actor, r)},
            "filtered": is_filtered(filters),
        },
    )


def may_cancel(actor: Actor, run: Run) -> bool:
    """Whether the API's rule lets ``actor`` cancel ``run`` (whatever its status)."""
    try:
        check_may_cancel(actor, run)
    except NotAllowed:
        return False
    return True


def _may_cancel(actor: Actor, run: Run) -> bool:
    return not run.is_terminal and run.status != RunStatus.CANCELLING and may_cancel(actor, run)


def _visible_run(request: HttpRequest, run_id: str) -> Run:
    # A run the user may not see is unknown, as in the API.
    return get_object_or_404(visible_runs(actor_of(request)).select_related("thread"), pk=run_id)


def _run_context(request: HttpRequest, run_id: str) -> dict[str, Any]:
    run = _visible_run(request, run_id)
    seen = visible_runs(actor_of(request))
    steps = list(run.steps.order_by("started_at"))
    calls = list(run.tool_calls.order_by("requested_at", "position"))
    attempts = DecisionAttempt.objects.filter(run_id=run.pk).order_by("created_at")
    frames = list(StreamFrame.objects.filter(run=run).order_by("seq"))
    by_call: dict[str, list[DecisionAttempt]] = {}
    for attempt in attempts:
        by_call.setdefault(attempt.tool_call_id, []).append(attempt)
    notified: dict[str, list[Delivery]] = {}
    for delivery in Delivery.objects.filter(tool_call__run=run).order_by("created_at", "id"):
        notified.setdefault(delivery.tool_call_id, []).append(delivery)
    proposals = _proposals_of(calls)
    return {
        "run": run,
        "may_cancel": _may_cancel(actor_of(request), run),
        "may_fork": visible_threads(actor_of(request)).filter(pk=run.thread_id).exists(),
        "transcript": list(run.messages.order_by("seq")),
        "steps": [{"step": s, "took": _took(s, calls)} for s in steps],
        "calls": [
            {
                "call": c,
                "attempts": by_call.get(c.pk, []),
                "deliveries": notified.get(c.pk, []),
                "proposal": proposals.get(c.pk),
            }
            for c in calls
        ],
        "frames": frames,
        "last_seq": frames[-1].seq if frames else 0,
        # The delegation tree around the run (SPEC §14): who started it, what it started, as
        # far as the viewer may see them (an approver of a child's call may not see its parent).
        "parent": seen.filter(pk=run.parent_run_id).first() if run.parent_run_id else None,
        "children": list(seen.filter(parent_run=run).order_by("created_at")),
    }


def _proposals_of(calls: list[ToolCall]) -> dict[str, ToolCall]:
    """The independent proposals (SPEC §17) the run's calls made, by the call that made each."""
    made = {
        c.pk: c.result["proposal_id"]
        for c in calls
        if isinstance(c.result, dict) and isinstance(c.result.get("proposal_id"), str)
    }
    found = ToolCall.objects.in_bulk(list(made.values()))
    return {
        pk: found[proposal]
        for pk, proposal in made.items()
        if proposal in found and found[proposal].thread_id == calls[0].thread_id
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
    return page(request, "console/run.html", _run_context(request, run_id))


@console_view
def run_fragment(request: HttpRequest, run_id: str) -> HttpResponse:
    """The run's details alone, fetched by the page when the run moved on."""
    return fragment(request, "console/partials/run_details.html", _run_context(request, run_id))


@require_POST
@console_view
def cancel(request: HttpRequest, run_id: str) -> HttpResponse:
    """Cancel a run (and its children): settled at once when it is parked, else ``cancelling``
    until its driver reaches a safe point (``request_cancel``, as the API). A refusal is shown on
    the run's page; a run already finished or being cancelled is left as it is."""
    before = _visible_run(request, run_id)
    try:
        run = request_cancel(before.pk, actor=actor_of(request))
    except NotAllowed as exc:
        return _refused(request, run_id, exc.message, status=403)
    # Accepted whatever the run's status, as over REST (idempotent); the message says what it did.
    if before.is_terminal or before.status == RunStatus.CANCELLING:
        messages.info(request, _too_late(before))
    elif run.status == RunStatus.CANCELLING:
        messages.success(request, f"Cancelling {run.pk}: it stops at its next safe point.")
    else:
        messages.success(request, f"Cancelled {run.pk}.")
    back = request.POST.get("next", "")
    if url_has_allowed_host_and_scheme(back, {request.get_host()}, request.is_secure()):
        return redirect(back)
    return redirect("console:run", run.pk)


def _too_late(run: Run) -> str:
    if run.status == RunStatus.CANCELLING:
        return "This run is already being cancelled: it stops at its next safe point."
    return f"This run already {run.status}: there is nothing to cancel."


def _refused(request: HttpRequest, run_id: str, error: str, *, status: int) -> HttpResponse:
    """The run's page again, with ``error`` (a refused cancel or fork) on it."""
    context = {**_run_context(request, run_id), "cancel_error": error}
    return page(request, "console/run.html", context, status=status)


@require_POST
@console_view
def fork(request: HttpRequest, run_id: str) -> HttpResponse:
    """Fork the run's thread after one of its messages into a thread of the viewer's own: the
    calls that had ended are copied with their results, never run again."""
    run = _visible_run(request, run_id)
    actor = actor_of(request)
    thread = get_object_or_404(visible_threads(actor), pk=run.thread_id)
    try:
        forked = history.fork(thread, request.POST.get("message_id", ""), actor=actor)
    except NotFound as exc:
        return _refused(request, run_id, exc.message, status=404)
    messages.success(request, f"Forked into thread {forked.pk}; yours to continue.")
    return redirect("console:run", forked.runs.get().pk)
