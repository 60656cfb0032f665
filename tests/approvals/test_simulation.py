"""Policy simulation (SPEC §19): recorded action calls replayed through a candidate policy,
read-only, counted by tool and approver."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import call_command

from agent_core.actors import Actor
from agent_core.models import Thread, ToolCall
from agent_core.tools import ToolSpec
from approvals.policy import ApprovalPolicy
from approvals.requirement import Requirement
from tests.conftest import calls_of

pytestmark = pytest.mark.django_db


class OperatorsPurge(ApprovalPolicy):
    """The candidate: purges need an operator for an hour; everything else as before."""

    def requirement_for(
        self, tool: ToolSpec, args: dict[str, Any], actor: Actor, thread: Thread
    ) -> Requirement:
        if tool.name == "purge_cache":
            return Requirement(approver="operator", ttl=None)
        return super().requirement_for(tool, args, actor, thread)


def simulate(*extra: str) -> Any:
    out = io.StringIO()
    call_command(
        "approvals", "simulate", f"{__name__}.OperatorsPurge", "--json", *extra, stdout=out
    )
    return json.loads(out.getvalue())


def test_simulate_counts_what_would_change_by_tool_and_approver(turn):
    for path in ("/a", "/b", "/a"):
        turn(f'/call purge_cache {{"path": "{path}"}}')
    before = list(ToolCall.objects.values_list("id", "status", "approver"))
    report = simulate()
    assert report["calls"] == 3 and report["changed"] == 3
    [group] = report["groups"]
    assert (group["tool"], group["approver"], group["calls"]) == ("purge_cache", "requester", 3)
    assert group["changed"] == 3
    assert group["changes"] == {"required": 0, "approver": 3, "ttl": 0, "quorum": 0}
    assert list(ToolCall.objects.values_list("id", "status", "approver")) == before


def test_simulate_only_looks_at_calls_since(turn):
    [call] = calls_of(turn('/call purge_cache {"path": "/a"}'))
    ToolCall.objects.filter(pk=call.pk).update(requested_at="2020-01-01T00:00:00Z")
    assert simulate("--since", "30d")["calls"] == 0
