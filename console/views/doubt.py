"""Calls a crash left in doubt, and marking them done (with a result) or not done."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from agent_core.exceptions import AgentCoreError, NotFound

from .. import in_doubt
from ..access import console_view
from ..forms import MarkDoneForm
from .common import actor_of, page


@console_view
def in_doubt_list(request: HttpRequest) -> HttpResponse:
    """Every call waiting on a person to say whether its side effect happened."""
    calls = [{"call": c, "form": MarkDoneForm(prefix=c.pk)} for c in in_doubt.in_doubt_calls()]
    return page(request, "console/in_doubt.html", {"calls": calls})


@require_POST
@console_view
def mark_done(request: HttpRequest, call_id: str) -> HttpResponse:
    """It happened: record the result the person gives; the tool does not run again."""
    form = MarkDoneForm(request.POST, prefix=call_id)
    if not form.is_valid():
        calls = [
            {"call": c, "form": form if c.pk == call_id else MarkDoneForm(prefix=c.pk)}
            for c in in_doubt.in_doubt_calls()
        ]
        return page(request, "console/in_doubt.html", {"calls": calls}, status=400)
    return _resolve(
        request,
        call_id,
        lambda: in_doubt.mark_done(call_id, form.cleaned_data["result"], actor_of(request)),
    )


@require_POST
@console_view
def mark_not_done(request: HttpRequest, call_id: str) -> HttpResponse:
    """It did not happen: the call runs again."""
    return _resolve(request, call_id, lambda: in_doubt.mark_not_done(call_id, actor_of(request)))


def _resolve(request: HttpRequest, call_id: str, apply: Callable[[], None]) -> HttpResponse:
    try:
        apply()
    except AgentCoreError as exc:
        status = 404 if isinstance(exc, NotFound) else 409
        calls = [{"call": c, "form": MarkDoneForm(prefix=c.pk)} for c in in_doubt.in_doubt_calls()]
        return page(
            request, "console/in_doubt.html", {"calls": calls, "error": exc.message}, status=status
        )
    messages.success(request, f"Resolved {call_id}.")
    return redirect("console:in_doubt")
