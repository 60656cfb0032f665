"""The runs and audit lists in a real browser: the API's filters in the page's form, the API's
keyset pages behind "Older", and the audit's CSV export of every filtered row."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from approvals import services as port
from tests.console.conftest import REFUND, actor
from tests.console.live.browser import call_of, in_thread, open_as, start

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PURGE = '/call purge_cache {"path": "/sale"}'


def test_the_runs_list_filters_and_pages(server, browser, people, sync_runner):
    refund = start(people, REFUND)
    purge = start(people, PURGE)
    otto = open_as(browser, server, "otto")
    otto.goto("/console/runs/?page_size=1")
    table = otto.get_by_role("region", name="Runs")
    expect(table).to_contain_text(purge.pk)  # newest first
    expect(table).not_to_contain_text(refund.pk)
    otto.get_by_role("link", name="Older →").click()
    expect(table).to_contain_text(refund.pk)
    expect(otto.get_by_role("link", name="Older →")).to_have_count(0)
    otto.get_by_role("link", name="← Newest").click()
    expect(table).to_contain_text(purge.pk)
    otto.goto("/console/runs/")
    otto.get_by_label("Actor").fill("alice")
    otto.get_by_label("Agent").fill("nobody")
    otto.get_by_role("button", name="Filter").click()
    expect(otto.get_by_text("No runs match these filters")).to_be_visible()
    otto.get_by_role("link", name="Clear").first.click()
    expect(table).to_contain_text(refund.pk)
    expect(table).to_contain_text(purge.pk)


def test_the_audit_filters_pages_and_exports_every_row(server, browser, people, sync_runner):
    calls = [call_of(start(people, REFUND)) for _ in range(3)]
    for call in calls:
        in_thread(lambda c=call: port.reject(c.pk, actor=actor(people["fran"]), reason="dup"))
    fran = open_as(browser, server, "fran")
    fran.goto("/console/audit/?page_size=2")
    fran.get_by_label("Actor").fill("fran")
    fran.get_by_role("button", name="Filter").click()
    rows = fran.get_by_role("region", name="Decision attempts").locator("tbody tr")
    expect(rows).to_have_count(3)  # the form's query has no page size: the default
    fran.goto("/console/audit/?actor=fran&page_size=2")
    expect(rows).to_have_count(2)
    fran.get_by_role("link", name="Older →").click()
    expect(rows).to_have_count(1)
    with fran.expect_download() as download:
        fran.get_by_role("link", name="Export CSV").click()
    exported = download.value.path().read_text().splitlines()
    assert len(exported) == 1 + 3  # the header and every row, not this page's
