"""The evidence of one call's decisions: what each decider was shown (its card digest), the
policy's digest, the args approved, and each attempt's link of the hash chain."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from approvals import evidence, quorum

from ..access import console_view
from .common import page, tool_call_or_404


@console_view
def call_evidence(request: HttpRequest, call_id: str) -> HttpResponse:
    """The call's evidence page (404 for a call the viewer may not see)."""
    call = tool_call_or_404(request, call_id)
    card = evidence.CallCard.of(call, quorum.standing(call)[0])
    context = {"call": call, "card": card, "attempts": evidence.of_call(call.pk)}
    return page(request, "console/evidence.html", context)
