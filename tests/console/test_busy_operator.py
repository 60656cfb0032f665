"""The console for a busy operator, in a real browser against a real server (issue #19):
live pages, cards kept while someone works on them, honest conflict messages, phones."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from agent_core.models import CallStatus, ToolCall
from tests.console.browser import call_of, card, in_thread, open_as, put_in_doubt, start, wait_live

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PURGE = '/call purge_cache {"path": "/sale"}'


def test_a_call_that_goes_in_doubt_appears_on_the_open_in_doubt_page(
    server, browser, people, sync_runner
):
    fran = open_as(browser, server, "fran")
    fran.goto("/console/in-doubt/")
    expect(fran.get_by_text("Nothing is in doubt")).to_be_visible()
    wait_live(fran)
    purge = call_of(start(people, PURGE, username="fran"))
    put_in_doubt(purge, people["fran"])
    expect(card(fran, purge)).to_contain_text("purge_cache")  # without a reload
    expect(fran.locator('[data-count="in_doubt"]')).to_have_text("1")
    assert in_thread(lambda: ToolCall.objects.get(pk=purge.pk).status) == CallStatus.IN_DOUBT
    expect(fran.get_by_role("button", name=re.compile("Mark done"))).to_be_visible()
