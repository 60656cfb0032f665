"""Three bugs of issue 42 (item 3) in a real browser: the quorum badge says who approved and
when, the counts of the navigation and the inbox's tab follow live and agree, and a run page's
link to a waiting call opens its card."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.console.conftest import REFUND
from tests.console.live.browser import (
    CAMPAIGN,
    call_of,
    card,
    in_thread,
    open_as,
    open_card,
    row,
    start,
    wait_live,
)
from tests.factories import make_user

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_the_quorum_badge_says_who_approved_and_when_and_the_counts_follow(
    server, browser, people, sync_runner
):
    def marketing() -> None:  # the demo's campaigns need two people of marketing
        mia = make_user("mia", "marketing", staff=True)
        people["otto"].groups.add(mia.groups.get())

    in_thread(marketing)
    campaign = call_of(start(people, CAMPAIGN))
    otto, mia = open_as(browser, server, "otto"), open_as(browser, server, "mia")
    counts = {
        who: page.locator('[data-count="waiting_on_you"]')
        for who, page in (("otto", otto), ("mia", mia))
    }
    for page in (otto, mia):
        wait_live(page)
    expect(counts["otto"]).to_have_text(["1", "1"])  # the nav's and the tab's
    expect(counts["mia"]).to_have_text(["1", "1"])
    second = call_of(start(people, CAMPAIGN.replace("spring-sale", "summer-sale")))
    expect(counts["otto"]).to_have_text(["2", "2"])  # live, and they agree
    expect(counts["mia"]).to_have_text(["2", "2"])

    opened = open_card(otto, campaign)
    expect(opened.locator("[data-quorum]")).to_have_text("0 of 2 approvals")
    opened.get_by_role("button", name="Approve", exact=True).click()
    expect(row(otto, campaign)).to_have_count(0)  # his part is done: it waits on others
    expect(counts["otto"]).to_have_text(["1", "1"])
    expect(counts["mia"]).to_have_text(["2", "2"])

    badge = open_card(mia, campaign).locator("[data-quorum]")
    expect(badge).to_have_text(
        re.compile(r"^1 of 2 approvals: otto approved (just now|\d+ .+ ago)$")
    )
    expect(badge.locator("[data-approved-by] time")).to_have_attribute(
        "title", re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
    )
    card(mia, campaign).get_by_role("button", name="Approve", exact=True).click()
    expect(row(mia, campaign)).to_have_count(0)
    expect(counts["mia"]).to_have_text(["1", "1"])
    expect(row(otto, second)).to_be_visible()


def test_a_run_pages_link_to_a_waiting_call_opens_its_card(server, browser, people, sync_runner):
    run = start(people, REFUND)
    refund = call_of(run)
    fran = open_as(browser, server, "fran")
    fran.goto(f"/console/runs/{run.pk}/")
    fran.locator(f'[data-decide][href*="{refund.pk}"]').click()
    opened = card(fran, refund)
    expect(opened).to_be_visible()
    opened.get_by_role("button", name="Approve", exact=True).click()
    expect(fran.get_by_text(f"Approved: issue_refund — {refund.summary}.")).to_be_visible()
