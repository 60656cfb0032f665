"""Approval analytics on the metrics page (SPEC §19): computed in SQL by the sweep's refresh,
read from its snapshot, shown to the ``ANALYTICS_ROLES`` only, the same numbers exported to
OpenTelemetry."""

from __future__ import annotations

import dataclasses
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
    assert a.outcomes == analytics.Outcomes("*", 4, 3, 1, 0, 1)
    assert a.tools == [analytics.Outcomes("issue_refund", 4, 3, 1, 0, 1)]
    assert a.overall is not None
    assert (a.overall.key, a.overall.decisions, a.overall.p50) == ("*", 3, 10.0)
    assert a.overall.p95 == pytest.approx(91.0)
    assert a.pending_ages == {
        "under 5 min": 0,
        "5 min to 1 h": 0,
        "1 h to 1 day": 1,
        "over 1 day": 0,
    }
    [stamp] = a.rubber_stamps
    assert (stamp.approver, stamp.fast, stamp.approvals) == (actor(people["fran"]).ref, 1, 2)


def test_the_snapshot_has_the_live_numbers(decided):
    assert analytics.refresh_due()
    snapshot = analytics.current()
    assert snapshot is not None
    live = analytics.compute(snapshot.since)
    assert snapshot == dataclasses.replace(live, as_of=snapshot.as_of)
    assert snapshot.by_tool and snapshot.rubber_stamps and snapshot.pending_ages["1 h to 1 day"]


def test_operators_see_the_analytics_others_do_not(decided, login):
    html = login("otto").get(reverse("console:metrics")).content.decode()
    assert "data-analytics" in html and "data-no-snapshot" in html  # the sweep has not run
    analytics.refresh_due()
    html = login("otto").get(reverse("console:metrics")).content.decode()
    assert "data-as-of=" in html and 'data-tool="issue_refund"' in html
    assert "data-stamper=" in html
    assert "data-analytics" not in login("felix").get(reverse("console:metrics")).content.decode()


def test_the_analytics_are_opentelemetry_metrics(decided, monkeypatch):
    """The gauges export the page's numbers: the snapshot's, with the live pending ages."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from approvals import telemetry

    monkeypatch.setattr(telemetry, "_last", None)  # another test's collection, still fresh
    analytics.refresh_due()
    a = analytics.current()
    assert a is not None
    reader = InMemoryMetricReader()
    telemetry.register(MeterProvider(metric_readers=[reader]).get_meter("test"))
    data: Any = reader.get_metrics_data()
    points = {
        metric.name: [(p.value, dict(p.attributes)) for p in metric.data.data_points]
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
    }
    [tool] = a.by_tool
    [approver] = a.by_approver
    assert sorted(points["airlock.approval.time_to_decision"], key=str) == sorted(
        [
            (tool.p50, {"airlock.tool": tool.key, "airlock.quantile": "p50"}),
            (tool.p95, {"airlock.tool": tool.key, "airlock.quantile": "p95"}),
            (approver.p50, {"airlock.approver": approver.key, "airlock.quantile": "p50"}),
            (approver.p95, {"airlock.approver": approver.key, "airlock.quantile": "p95"}),
        ],
        key=str,
    )
    assert tool.p50 == 10.0
    assert sorted(points["airlock.approval.pending"], key=str) == sorted(
        [(n, {"airlock.age": bucket}) for bucket, n in a.pending_ages.items()], key=str
    )
    assert (1, {"airlock.age": "1 h to 1 day"}) in points["airlock.approval.pending"]
    assert sorted(points["airlock.approval.rate"], key=str) == sorted(
        [
            (a.outcomes.rejection_rate, {"airlock.outcome": "rejected"}),
            (a.outcomes.expiry_rate, {"airlock.outcome": "expired"}),
            (a.outcomes.edit_rate, {"airlock.outcome": "edited"}),
        ],
        key=str,
    )
    [stamp] = a.rubber_stamps
    assert points["airlock.approval.rubber_stamps"] == [(1, {"enduser.id": stamp.approver})]
