"""Fixtures of the approvals tests: a local webhook receiver, a notification to send to it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User

from agent_core import signals
from agent_core.engine import runs
from agent_core.models import ToolCall
from agent_core.runner.inline import InlineRunner
from approvals.models import Delivery
from approvals.notify.notice import REQUESTED
from tests.approvals.receiver import Receiver
from tests.approvals.rest import client_for
from tests.conftest import ALICE, REFUND


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A receiver that answers 200 (a test may set its ``status`` or ``failures``)."""
    found = Receiver()
    yield found
    found.close()


@pytest.fixture
def pending(shop: None, sync_runner: InlineRunner) -> Delivery:
    """A webhook notification of a waiting call, recorded and not yet attempted."""
    run = runs.start_run(agent="support", message=REFUND, actor=ALICE)  # no channels: no rows
    return Delivery.objects.create(
        tool_call=ToolCall.objects.get(run=run), event=REQUESTED, channel="webhook"
    )


@pytest.fixture
def post(django_capture_on_commit_callbacks):
    """POST as ``person`` and let the run the decision resumes be driven before returning."""

    def call(person: User | None, url: str, body: dict) -> tuple[int, dict]:
        with django_capture_on_commit_callbacks(execute=True):
            response = client_for(person).post(url, body, format="json")
        return response.status_code, response.json()

    return call


@pytest.fixture
def sent():
    """Every ``approval_requested`` / ``approval_settled`` signal: (signal, call id, status)."""
    log: list[tuple[str, str, str]] = []

    def requested(sender, call, **kwargs):
        log.append(("requested", call.pk, call.status))

    def settled(sender, call, **kwargs):
        log.append(("settled", call.pk, call.status))

    signals.approval_requested.connect(requested)
    signals.approval_settled.connect(settled)
    yield log
    signals.approval_requested.disconnect(requested)
    signals.approval_settled.disconnect(settled)
