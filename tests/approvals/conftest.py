"""Fixtures of the approvals tests: a local webhook receiver, a notification to send to it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agent_core import runs
from agent_core.models import ToolCall
from agent_core.runner.inline import InlineRunner
from approvals.models import Delivery
from approvals.notify.notice import REQUESTED
from tests.approvals.receiver import Receiver
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
