"""A requester's side of the console (issue 42, item 5), in a real browser: alice, who holds no
console role, decides her own ``purge_cache`` in the inbox and follows her refund in My
requests; the operators' pages stay closed to her."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect

from agent_core.actors import actor_for_user
from agent_core.choices import CallStatus
from agent_core.models import ToolCall
from approvals import links
from tests.console.conftest import REFUND
from tests.console.live.browser import call_of, in_thread, open_as, open_card, start

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PURGE = '/call purge_cache {"path": "/blog"}'


def test_a_requester_decides_her_own_call_and_follows_her_requests(
    server, browser, people, sync_runner
):
    refund = call_of(start(people, REFUND))  # waits on finance
    purge = call_of(start(people, PURGE))  # waits on alice herself
    alice = open_as(browser, server, "alice")
    nav = alice.get_by_role("navigation", name="Console")
    expect(nav.get_by_role("link", name="Audit")).to_have_count(0)
    mine = open_card(alice, purge)
    mine.get_by_role("button", name="Approve", exact=True).click()
    expect(alice.get_by_role("status").first).to_contain_text("Approved")
    nav.get_by_role("link", name="My requests").click()
    table = alice.locator("[data-mine]")
    listed = table.locator(f'[data-call="{refund.pk}"]')
    expect(listed.locator("[data-who]")).to_have_text("finance")
    expect(listed.locator("[data-state]")).to_have_text("waiting for approval")
    expect(listed.locator("[data-deadline]")).not_to_have_text("none")
    expect(table.locator(f'[data-call="{purge.pk}"]')).to_have_count(0)
    assert in_thread(lambda: ToolCall.objects.get(pk=purge.pk).status) != (
        CallStatus.PENDING_APPROVAL
    )
    alice.goto("/console/audit/")
    expect(alice.get_by_text("No access", exact=False).first).to_be_visible()


def test_a_questions_link_opens_a_form_that_answers_it(server, browser, people, sync_runner):
    question = call_of(start(people, '/call ask_user {"question": "Which order?"}'))
    link = in_thread(
        lambda: links.answer_link(question, actor_for_user(people["alice"]).ref, via="email")
    )
    page = browser.new_context(base_url=server.url).new_page()  # no login: the link is enough
    page.goto(urlsplit(link["answer"]).path)
    expect(page.get_by_text("Which order?")).to_be_visible()
    page.get_by_label("Answer").fill("A-1003")
    page.get_by_role("button", name="Answer").click()
    expect(page.get_by_role("heading", name="Answered")).to_be_visible()
    done = in_thread(lambda: ToolCall.objects.get(pk=question.pk))
    assert done.result == {"answer": "A-1003"} and done.decided_via == "email"
