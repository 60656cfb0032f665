"""The approval analytics' snapshot (SPEC §19): the sweep recomputes it every
ANALYTICS_REFRESH, one process at a time however many sweep."""

from __future__ import annotations

import threading

import pytest
from django.db import connections, transaction
from django.test import override_settings

from agent_core.engine import rows
from agent_core.engine import sql as core_sql
from approvals import analytics
from approvals.models import AnalyticsSnapshot
from tests.conftest import at_once


@pytest.mark.django_db
def test_a_refresh_waits_for_its_interval():
    assert analytics.current() is None
    assert analytics.refresh_due()
    first = AnalyticsSnapshot.objects.get()
    assert not analytics.refresh_due()  # fresh: nothing to do
    with override_settings(APPROVALS={"ANALYTICS_REFRESH": 0.000001}):
        assert analytics.refresh_due()
    assert AnalyticsSnapshot.objects.get().computed_at > first.computed_at


@pytest.mark.django_db(transaction=True)
def test_several_sweepers_refresh_once():
    refreshed = at_once(6, analytics.refresh_due)
    assert sorted(refreshed) == [False] * 5 + [True]
    assert AnalyticsSnapshot.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_sweeper_skips_while_another_refreshes():
    """Another process holds the refresh's lock (it is computing): this one does not wait for
    it and writes nothing; once the lock is gone, it refreshes."""
    held = threading.Event()
    done = threading.Event()

    def other_process() -> None:
        try:
            with transaction.atomic():
                rows.fetch_one(core_sql.TRY_ADVISORY_LOCK, {"name": analytics._REFRESHING})
                held.set()
                done.wait(10)
        finally:
            connections["default"].close()

    other = threading.Thread(target=other_process)
    other.start()
    try:
        assert held.wait(10)
        assert not analytics.refresh_due()
        assert not AnalyticsSnapshot.objects.exists()
    finally:
        done.set()
        other.join()
    assert analytics.refresh_due()
