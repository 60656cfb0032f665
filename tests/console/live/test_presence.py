"""Presence (issue 42, item 8) in a real browser: an approver sees who else has a card open,
until they close it, close their page, or their browser goes quiet for good; someone who may not
see the call neither hears of its viewers nor is heard."""

from __future__ import annotations

import re

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import WebSocketRoute, expect

from console.consumers import PRESENCE_SECONDS
from tests.console.conftest import REFUND
from tests.console.live.browser import (
    DESKTOP,
    PHONE,
    call_of,
    open_as,
    open_card,
    row,
    start,
    wait_live,
)
from tests.console.live.test_busy_operator import _serious

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# A socket of the page's own, as a curious script would open one: it says it has the card open
# and returns what it hears in the next second and a half.
ASK_WHO_VIEWS = """async ([path, callId]) => {
  const ws = new WebSocket("ws://" + location.host + path), heard = [];
  await new Promise((opened) => { ws.onopen = opened; });
  ws.onmessage = (e) => heard.push(JSON.parse(e.data));
  ws.send(JSON.stringify({type: "viewing", call_id: callId}));
  await new Promise((done) => setTimeout(done, 1500));
  ws.close();
  return heard.filter((m) => m.type === "presence");
}"""


def test_approvers_see_who_else_has_a_card_open_and_others_see_nothing(
    server, browser, people, sync_runner, shots
):
    refund = call_of(start(people, REFUND))  # alice's, for finance
    fran = open_as(browser, server, "fran", DESKTOP)
    felix = open_as(browser, server, "felix")
    # felix's page can be made to go quiet with its socket left open: a browser that froze or
    # died without closing it (the server then never hears that he left).
    quiet = {"on": False}

    def relay(ws: WebSocketRoute) -> None:
        upstream = ws.connect_to_server()
        ws.on_message(lambda message: None if quiet["on"] else upstream.send(message))

    felix.route_web_socket(re.compile(r".*/console/ws/$"), relay)
    felix.reload()
    for page in (fran, felix):
        wait_live(page)
    mine = open_card(fran, refund)
    shown = mine.locator("[data-presence]")
    expect(shown).to_have_count(0)  # alone with it
    theirs = open_card(felix, refund)
    expect(theirs.locator("[data-presence]")).to_have_text("fran is viewing")  # at once
    expect(shown).to_have_text("felix is viewing")
    fran.screenshot(path=shots / "presence-1280.png")
    axe = Axe()
    assert _serious(axe, fran) == []

    phone = open_as(browser, server, "fran", PHONE)  # her own second page: him, not herself
    wait_live(phone)
    on_phone = open_card(phone, refund)
    expect(on_phone.locator("[data-presence]")).to_have_text("felix is viewing")
    expect(shown).to_have_text("felix is viewing")
    phone.screenshot(path=shots / "presence-390.png")
    assert _serious(axe, phone) == []
    phone.close()

    # bob may not see alice's refund: saying he has it open tells him nothing, and nobody of him.
    bob = open_as(browser, server, "bob")
    wait_live(bob)
    assert bob.evaluate(ASK_WHO_VIEWS, ["/console/ws/", refund.pk]) == []
    expect(shown).to_have_text("felix is viewing")
    response = bob.goto(f"/console/calls/{refund.pk}/")
    assert response is not None and response.status == 404
    expect(bob.locator("[data-presence]")).to_have_count(0)

    otto = open_as(browser, server, "otto")  # the operator sees every call: he is shown too
    wait_live(otto)
    otto.goto("/console/inbox/?show=others")
    open_card(otto, refund)
    expect(shown).to_have_text("felix and otto are viewing")
    otto.close()  # a page closed leaves its cards
    expect(shown).to_have_text("felix is viewing")
    own = open_as(browser, server, "otto")
    own.goto(f"/console/calls/{refund.pk}/")  # a call's own page (a link's) counts too
    expect(own.locator("[data-presence]")).to_have_text("felix and fran are viewing")
    expect(shown).to_have_text("felix and otto are viewing")
    assert _serious(axe, own) == []
    own.close()
    expect(shown).to_have_text("felix is viewing")

    row(felix, refund).locator("[data-open]").click()  # felix closes the card
    expect(shown).to_have_count(0)
    open_card(felix, refund)
    expect(shown).to_have_text("felix is viewing")

    # felix's browser dies, its socket open: he is shown until his last word is PRESENCE_SECONDS
    # old (his page spoke at most a third of that ago), then no longer.
    quiet["on"] = True
    fran.clock.install()
    fran.clock.fast_forward(PRESENCE_SECONDS // 3 * 1000)
    fran.wait_for_timeout(1500)
    expect(shown).to_have_text("felix is viewing")
    fran.clock.fast_forward(PRESENCE_SECONDS * 1000)
    expect(shown).to_have_count(0)
