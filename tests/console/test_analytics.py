"""Approval analytics on the metrics page (SPEC §19): computed in SQL, shown to the
``ANALYTICS_ROLES`` only."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from agent_core.models import ToolCall
from approvals import analytics
from approvals import services as port
from tests.console.conftest import actor, copies_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def decided(refund, people, decide):
    """Four refunds waiting on finance: approved after 2 s (a rubber stamp) and 100 s (edited),
    rejected after 10 s, one still waiting for two hours."""
    calls = [refund, *copies_of(refund, 3)]
    fran = actor(people["fran"])
    decide(port.approve, calls[0].pk, actor=fran)
    decide(port.approve, calls[1].pk, actor=fran, args={"order_id": "A-1001", "amount": 3})
    decide(port.reject, calls[2].pk, actor=fran, reason="no")
    now = timezone.now()
    for call, seconds in zip(calls[:3], (2, 100, 10), strict=True):
        ToolCall.objects.filter(pk=call.pk).update(
            requested_at=now - timedelta(seconds=seconds), decided_at=now
        )
    ToolCall.objects.filter(pk=calls[3].pk).update(requested_at=now - timedelta(hours=2))
    return calls


def test_the_numbers(decided, people):
    a = analytics.compute(timezone.now() - timedelta(days=1))
    [tool] = a.by_tool
    assert (tool.key, tool.decisions, tool.p50) == ("issue_refund", 3, 10.0)
    assert tool.p95 == pytest.approx(91.0)  # percentile_cont: interpolated
    [approver] = a.by_approver
    assert approver.key == "finance"
    assert (a.settled, a.rejected, a.expired, a.edited) == (3, 1, 0, 1)
    assert a.pending_ages == {
        "under 5 min": 0,
        "5 min to 1 h": 0,
        "1 h to 1 day": 1,
        "over 1 day": 0,
    }
    [stamp] = a.rubber_stamps
    assert (stamp.approver, stamp.fast, stamp.approvals) == (actor(people["fran"]).ref, 1, 2)


def test_operators_see_the_analytics_others_do_not(decided, login):
    html = login("otto").get(reverse("console:metrics")).content.decode()
    assert "data-analytics" in html and 'data-tool="issue_refund"' in html
    assert "data-stamper=" in html
    assert "data-analytics" not in login("felix").get(reverse("console:metrics")).content.decode()


def test_the_analytics_are_opentelemetry_metrics(decided):
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from approvals import telemetry

    reader = InMemoryMetricReader()
    telemetry.register(MeterProvider(metric_readers=[reader]).get_meter("test"))
    data: Any = reader.get_metrics_data()
    points = {
        metric.name: [(p.value, dict(p.attributes)) for p in metric.data.data_points]
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
    }
    assert (10.0, {"airlock.tool": "issue_refund", "airlock.quantile": "p50"}) in points[
        "airlock.approval.time_to_decision"
    ]
    assert (1, {"airlock.age": "1 h to 1 day"}) in points["airlock.approval.pending"]
    assert points["airlock.approval.rubber_stamps"][0][0] == 1
