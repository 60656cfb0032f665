"""The console for a busy operator, in a real browser against a real server (issue #19):
live pages, cards kept while someone works on them, honest conflict messages, phones."""

from __future__ import annotations

import re

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page, expect

from agent_core.choices import CallStatus
from agent_core.models import ToolCall
from approvals import services as port
from approvals.models import DecisionAttempt
from tests.console.conftest import REFUND, actor
from tests.console.live.browser import (
    LAPTOP,
    PHONE,
    call_of,
    card,
    in_thread,
    open_as,
    open_card,
    put_in_doubt,
    row,
    start,
    wait_live,
)

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


def test_a_card_being_worked_on_stays_as_a_notice_with_the_typed_text(
    server, browser, people, sync_runner
):
    refund = call_of(start(people, REFUND))
    fran = open_as(browser, server, "fran")
    wait_live(fran)
    mine = open_card(fran, refund)
    mine.get_by_text("Reject…").click()
    mine.get_by_label("Reason (the agent is told)").fill("Looks like a duplicate")
    in_thread(lambda: port.approve(refund.pk, actor=actor(people["felix"]), via="api"))
    notice = mine.locator("[data-notice]")
    expect(notice).to_contain_text(
        re.compile(r"felix approved this \d+ s ago.* Your rejection was not sent\.")
    )
    expect(mine.get_by_label("Reason (the agent is told)")).to_have_value("Looks like a duplicate")
    expect(mine.get_by_role("button", name="Reject")).to_be_disabled()
    mine.get_by_role("button", name="Dismiss").click()
    expect(mine).to_have_count(0)


def test_a_stale_approve_says_who_decided_and_when(server, browser, people, sync_runner):
    refund = call_of(start(people, REFUND))
    felix = open_as(browser, server, "felix")
    felix.route_web_socket(re.compile(r".*/console/ws/.*"), lambda ws: None)  # a stale tab
    felix.reload()
    stale = open_card(felix, refund)
    in_thread(lambda: port.approve(refund.pk, actor=actor(people["fran"]), via="console"))
    stale.get_by_role("button", name="Approve", exact=True).click()
    expect(felix.locator("[data-unchanged]")).to_contain_text(
        re.compile(r"fran approved this \d+ s ago; .* Your approval changed nothing\.")
    )
    expect(felix.get_by_text(f"Approved: issue_refund — {refund.summary}.")).to_have_count(0)
    attempts = in_thread(
        lambda: list(
            DecisionAttempt.objects.filter(tool_call_id=refund.pk).values_list(
                "actor_ref", "outcome"
            )
        )
    )
    assert (in_thread(lambda: actor(people["felix"]).ref), "unchanged") in attempts


def test_an_operator_resolves_an_in_doubt_call_of_someone_elses(
    server, browser, people, sync_runner
):
    purge = call_of(start(people, PURGE))  # alice's own purge: she approves it herself
    put_in_doubt(purge, people["alice"])
    otto = open_as(browser, server, "otto")
    otto.goto("/console/in-doubt/")
    mine = card(otto, purge)
    mine.get_by_label(re.compile("Result")).fill('{"purged": "/sale"}')
    mine.get_by_role("button", name="Mark done").click()
    expect(otto.get_by_text(f"Marked done: purge_cache ({purge.pk}).")).to_be_visible()
    resolved = in_thread(lambda: ToolCall.objects.get(pk=purge.pk))
    assert resolved.status == CallStatus.SUCCEEDED and resolved.result == {"purged": "/sale"}
    attempt = in_thread(lambda: DecisionAttempt.objects.get(action="mark_done"))
    assert attempt.outcome == "applied" and attempt.actor_ref == f"user:{people['otto'].pk}"


def test_no_page_scrolls_sideways_on_a_phone(server, browser, people, sync_runner):
    refund = call_of(start(people, REFUND))
    purge = call_of(start(people, PURGE, username="fran"))
    in_thread(
        lambda: port.approve(purge.pk, actor=actor(people["fran"]), remember=True, via="console")
    )
    in_thread(lambda: port.reject(refund.pk, actor=actor(people["fran"]), reason="x" * 300))
    phone = open_as(browser, server, "fran", PHONE)
    pages = [
        "/console/inbox/",
        "/console/in-doubt/",
        "/console/remembered/",
        "/console/runs/",
        f"/console/runs/{refund.run_id}/",
        "/console/audit/",
        "/console/metrics/",
    ]
    for path in pages:
        phone.goto(path)
        width = phone.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], f"{path} is {width} px wide at {PHONE['width']} px"


def test_focus_moves_to_the_next_card_and_the_audit_fits_a_laptop(
    server, browser, people, sync_runner
):
    first = call_of(start(people, REFUND))
    second = call_of(start(people, REFUND))
    fran = open_as(browser, server, "fran", {"width": 1366, "height": 768})
    wait_live(fran)
    open_card(fran, first).get_by_role("button", name="Approve", exact=True).click()
    # The next row opens into its card, the focus on the row, never on its Approve: Enter twice
    # does not decide two calls (issue 42).
    expect(card(fran, second)).to_be_visible()
    expect(row(fran, second).locator("[data-open]")).to_be_focused()
    fran.keyboard.press("Enter")  # toggles the focused row closed; nothing decided
    expect(card(fran, second)).to_have_count(0)
    assert in_thread(lambda: ToolCall.objects.get(pk=second.pk).status) == (
        CallStatus.PENDING_APPROVAL
    )
    fran.goto("/console/audit/")
    overflow = fran.evaluate(
        "(() => { const w = document.querySelector('.table-wrap');"
        " return w.scrollWidth - w.clientWidth; })()"
    )
    assert overflow <= 0


def test_keyboard_shortcuts_and_the_context_of_a_call(server, browser, people, sync_runner):
    first = call_of(start(people, REFUND))
    second = call_of(start(people, REFUND))
    fran = open_as(browser, server, "fran")
    wait_live(fran)
    opened = open_card(fran, first)
    expect(opened.locator("[data-context]")).to_contain_text("alice asked")
    expect(opened.get_by_role("link", name="Transcript")).to_have_attribute(
        "href", f"/console/runs/{first.run_id}/#transcript-h"
    )
    row(fran, first).locator("[data-open]").click()  # closes it again
    expect(card(fran, first)).to_have_count(0)
    fran.keyboard.press("?")
    expect(fran.get_by_role("dialog", name="Keyboard shortcuts")).to_be_visible()
    fran.keyboard.press("Escape")
    fran.keyboard.press("j")
    expect(row(fran, second).locator("[data-open]")).to_be_focused()
    fran.keyboard.press("k")
    expect(row(fran, first).locator("[data-open]")).to_be_focused()
    fran.keyboard.press("a")  # opens the card and approves
    expect(fran.get_by_text(f"Approved: issue_refund — {first.summary}.")).to_be_visible()
    expect(card(fran, first)).to_have_count(0)
    fran.keyboard.press("r")  # focus moved to the next row: r is about its card
    reason = card(fran, second).get_by_label("Reason (the agent is told)")
    expect(reason).to_be_focused()
    fran.keyboard.type("Not this one")
    card(fran, second).get_by_role("button", name="Reject").click()
    expect(fran.get_by_text(f"Rejected: issue_refund — {second.summary}.")).to_be_visible()
    statuses = in_thread(lambda: [ToolCall.objects.get(pk=c.pk).status for c in (first, second)])
    assert statuses[1] == CallStatus.REJECTED and statuses[0] != CallStatus.PENDING_APPROVAL


def test_axe_finds_no_serious_or_critical_violation_on_any_page(
    server, browser, people, sync_runner
):
    refund = call_of(start(people, REFUND))
    start(people, REFUND)  # its duplicate: the card shows it, and its related calls
    purge = call_of(start(people, PURGE, username="fran"))
    put_in_doubt(purge, people["fran"])
    grant = call_of(start(people, PURGE.replace("/sale", "/home"), username="fran"))
    in_thread(lambda: port.approve(grant.pk, actor=actor(people["fran"]), remember=True))
    axe = Axe()
    login = browser.new_context(base_url=server.url).new_page()
    login.goto("/console/login/")
    found = {"/console/login/": _serious(axe, login)}
    for viewport in (LAPTOP, PHONE):
        fran = open_as(browser, server, "fran", viewport)
        fran.goto("/console/inbox/")
        open_card(fran, refund)  # the list with a card open
        found[f"/console/inbox/ (a card open) {viewport['width']}px"] = _serious(axe, fran)
        for path in (
            "/console/inbox/",
            "/console/mine/",
            "/console/in-doubt/",
            "/console/remembered/",
            "/console/runs/",
            f"/console/runs/{refund.run_id}/",
            "/console/audit/",
            "/console/metrics/",
        ):
            fran.goto(path)
            found[f"{path} {viewport['width']}px"] = _serious(axe, fran)
    assert not any(found.values()), {k: v for k, v in found.items() if v}


def _serious(axe: Axe, page: Page) -> list[str]:
    violations = axe.run(page).response["violations"]
    return [
        f"{v['id']} ({v['impact']}): {[n['target'] for n in v['nodes']][:3]}"
        for v in violations
        if v["impact"] in ("serious", "critical")
    ]
