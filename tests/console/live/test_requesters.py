"""A requester's side of the console (issue 42, item 5), in a real browser: alice, who holds no
console role, decides her own ``purge_cache`` in the inbox and follows her refund in My
requests; the operators' pages stay closed to her."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import expect

from agent_core.actors import actor_for_user
from agent_core.choices import CallStatus
from agent_core.models import ToolCall
from approvals import links
from approvals import services as port
from tests.console.conftest import REFUND, actor
from tests.console.live.browser import (
    DESKTOP,
    PHONE,
    call_of,
    card,
    in_thread,
    open_as,
    open_card,
    start,
    too_small_to_touch,
    wait_live,
)
from tests.console.live.test_busy_operator import _serious

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


def test_my_requests_follow_their_calls_live_and_open_their_cards(
    server, browser, people, sync_runner, shots
):
    alice = open_as(browser, server, "alice", DESKTOP)
    heard: list[str] = []
    alice.on("websocket", lambda ws: ws.on("framereceived", lambda f: heard.append(str(f))))
    alice.goto("/console/mine/")
    wait_live(alice)
    expect(alice.get_by_text("Nothing of yours is waiting on anyone.")).to_be_visible()
    refund = call_of(start(people, REFUND))  # arrives without a reload
    mine = alice.locator("[data-mine]")
    listed = mine.locator(f'[data-call="{refund.pk}"]')
    expect(listed.locator("[data-who]")).to_have_text("finance")
    purge = call_of(start(people, PURGE))
    expect(mine.locator(f'[data-call="{purge.pk}"] [data-who]')).to_have_text("you")
    bobs = start(people, REFUND, username="bob")  # bob's own: not hers to hear of
    alice.screenshot(path=shots / "mine-1280.png")
    assert _serious(Axe(), alice) == []
    phone = open_as(browser, server, "alice", PHONE)
    phone.goto("/console/mine/")
    wait_live(phone)
    expect(phone.locator(f'[data-call="{refund.pk}"]')).to_be_visible()
    # On a phone every call reads whole without scrolling sideways, every target is a finger's.
    overflow = phone.evaluate(
        "(() => { const w = document.querySelector('[data-mine]').closest('.table-wrap');"
        " return [w.scrollWidth - w.clientWidth, document.documentElement.scrollWidth]; })()"
    )
    assert too_small_to_touch(phone) == []
    assert overflow[0] <= 0 and overflow[1] <= PHONE["width"], overflow
    assert _serious(Axe(), phone) == []
    phone.screenshot(path=shots / "mine-390.png")
    in_thread(lambda: port.approve(refund.pk, actor=actor(people["fran"]), via="api"))
    expect(listed).to_have_count(0)  # decided elsewhere: it leaves
    expect(mine.locator("[data-call]")).to_have_count(1)
    assert not any(bobs.pk in frame for frame in heard), heard
    mine.locator(f'[data-call="{purge.pk}"] a').click()  # a row opens the call's card
    expect(card(alice, purge).get_by_role("button", name="Approve", exact=True)).to_be_visible()
