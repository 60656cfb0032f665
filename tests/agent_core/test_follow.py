"""The CLI's follower (``agent_core.cli.follow``) over a delegating run (SPEC §14)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from agent_core.choices import RunStatus
from agent_core.cli.follow import RunFollower
from agent_core.models import Run, ToolCall
from approvals import services as port
from tests.conftest import ALICE

pytestmark = pytest.mark.django_db

REFUND = '/call issue_refund {"order_id": "A-1001", "amount": 30}'


def test_a_child_ending_between_the_follower_reads_does_not_stop_the_follow(
    desk: Callable[..., Run], decide: Callable[..., Any]
) -> None:
    """The follower reads the parent, then its frames, then its children. A child that ends in
    between (and with it the parent, re-queued and driven to its end) once left a run read as
    waiting with no child to wait on: the follow stopped, and the CLI said the run was blocked."""
    parent = desk(f"/call ask_billing {json.dumps({'message': REFUND})}")
    [refund] = ToolCall.objects.filter(run__parent_run=parent)
    assert parent.status == RunStatus.WAITING

    def write(text: str) -> None:
        if ToolCall.objects.get(pk=refund.pk).status == "pending_approval":
            decide(port.approve, refund.pk, actor=ALICE)

    followed = RunFollower(parent.pk).follow(write, poll=0.01)
    assert followed.status == RunStatus.COMPLETED
