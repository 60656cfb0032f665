"""The console's notifications page in Chromium: accessible, and no wider than a phone."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from approvals.models import Delivery, DeliveryStatus
from tests.console.conftest import REFUND, actor
from tests.console.live.browser import LAPTOP, PHONE, call_of, in_thread, open_as, start
from tests.console.live.test_busy_operator import _serious


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_notifications_page_in_a_browser_is_accessible_and_fits_a_phone(
    server, browser, people, sync_runner
):
    from axe_playwright_python.sync_playwright import Axe

    call = call_of(start(people, REFUND))

    def record() -> None:
        for n, status in enumerate(DeliveryStatus):
            Delivery.objects.create(
                tool_call_id=call.pk,
                event="approval-requested",
                channel="webhook-with-a-rather-long-name",
                recipient_ref=actor(people["fran"]).ref if n else "",
                status=status,
                attempts=n + 1,
                error="ConnectError: " + "x" * 200 if status == DeliveryStatus.FAILED else "",
            )

    in_thread(record)
    axe = Axe()
    for viewport in (LAPTOP, PHONE):
        otto = open_as(browser, server, "otto", viewport)
        if viewport == PHONE:  # on a phone every section is behind the menu
            otto.get_by_role("button", name="Menu").click()
        otto.get_by_role("link", name="Notifications").click()
        expect(otto.get_by_role("heading", name="Notifications")).to_be_visible()
        expect(otto.get_by_text("Last error: ConnectError")).to_be_visible()
        assert _serious(axe, otto) == []
        width = otto.evaluate("document.documentElement.scrollWidth")
        assert width <= viewport["width"], f"{width} px wide at {viewport['width']} px"
        otto.goto(f"/console/runs/{call.run_id}/")
        otto.get_by_text("Notifications (3)").click()
        assert _serious(axe, otto) == []
        assert otto.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
