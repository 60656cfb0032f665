"""An inbox row's HTML and its relative times, held byte for byte to what ``format_html`` and
Django's ``timesince`` made of them before the row was put together by hand (``console.rows``,
``console.templatetags.console.when``): the old code is kept here as the oracle."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta

import pytest
from django.utils import timezone, translation
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.timesince import timesince, timeuntil

from console import rows
from console.rows import Row
from console.templatetags.console import _units, when

MARGIN = timedelta(seconds=30)  # away from a minute's edge: `when` reads the clock itself
_SELECT = (
    '<input type="checkbox" name="ids" value="{}" form="bulk" data-select'
    ' aria-label="Select {} {}">'
)


def old_when(value: datetime) -> SafeString:
    now = timezone.now()
    relative = f"{timesince(value, now)} ago" if value <= now else f"in {timeuntil(value, now)}"
    absolute = timezone.localtime(value).strftime("%Y-%m-%d %H:%M:%S %Z")
    return format_html(
        '<time datetime="{}" title="{}" data-relative>{}</time>',
        value.isoformat(),
        absolute,
        relative.replace("\xa0", " "),
    )


def old_html(row: Row) -> SafeString:
    return format_html(
        rows._ROW,
        id=row["id"],
        key=row["key"],
        tool_name=row["tool_name"],
        summary=row["summary"],
        url=row["url"],
        requester=row["requester"],
        decider=row["decider"],
        read_only="" if row["selectable"] else " ro",
        select=format_html(_SELECT, row["id"], row["tool_name"], row["id"])
        if row["selectable"]
        else mark_safe('<span class="no-select"></span>'),
        quorum=format_html(" · {} of {}", row["approvals_given"], row["approvals_needed"])
        if row["approvals_needed"] > 1
        else "",
        escalated=format_html(" · <span data-escalated>escalated to {}</span>", row["escalated_to"])
        if row["escalated_to"]
        else "",
        amount=format_html(
            ' <span class="row-amount" data-amount="{}"><span class="sr-only">amount </span>{}'
            "</span>",
            row["amount"],
            row["amount"],
        )
        if row["amount"]
        else "",
        duplicate=format_html(
            ' <span class="badge duplicate" data-duplicate-of="{}">duplicate of {}</span>',
            row["duplicates"],
            row["duplicates"],
        )
        if row["duplicates"]
        else "",
        chain=format_html(' <span class="row-chain" data-chain>{}</span>', row["chain"])
        if row["chain"]
        else "",
        due=format_html(
            '<span class="badge expiry" data-countdown="{}">expires {}</span>',
            row["expires_at"],
            row["due"],
        )
        if row["expires_at"]
        else format_html('<span class="muted">asked {}</span>', row["due"]),
    )


def a_row(*, selectable: bool, quorum: bool, escalated: bool, deadline: bool, odd: bool) -> Row:
    """A row; ``odd``: every text carries characters HTML must escape."""
    text = '<b>"Tom & Jerry\'s"</b>' if odd else "plain"
    expires = timezone.now() + timedelta(hours=3) + MARGIN
    asked = timezone.now() - timedelta(days=2, minutes=5) - MARGIN
    return Row(
        id="tc_" + text,
        tool_name="issue_refund" + text,
        summary="Refund 20.00 " + text,
        requester="alice" + text,
        decider="finance" + text,
        approvals_needed=3 if quorum else 1,
        approvals_given=1 if quorum else 0,
        escalated_to="managers" + text if escalated else "",
        expires_at=expires.isoformat() if deadline else "",
        due=when(expires if deadline else asked),
        selectable=selectable,
        key="1764590000000000",
        url="/console/calls/tc_" + text,
        # An amount with the quorum's variants, a duplicate with the escalation's.
        amount="1,234.50" if quorum else "",
        duplicates="tc_first" + text if escalated else "",
        chain="support → billing" + text if deadline else "",
    )


@pytest.mark.parametrize("variant", list(itertools.product([False, True], repeat=5)))
def test_a_row_is_what_format_html_made_of_it(variant):
    selectable, quorum, escalated, deadline, odd = variant
    row = a_row(
        selectable=selectable, quorum=quorum, escalated=escalated, deadline=deadline, odd=odd
    )
    assert rows.html(row) == old_html(row)
    assert rows.html_of([row, row]) == f"{old_html(row)}\n{old_html(row)}\n"


def test_a_row_whose_time_is_unknown_shows_a_dash():
    row = a_row(selectable=True, quorum=False, escalated=False, deadline=False, odd=False)
    row["due"] = when(None)
    assert rows.html(row) == old_html(row)


AGO = [
    timedelta(0),
    timedelta(seconds=10),
    timedelta(minutes=1),
    timedelta(minutes=2),
    timedelta(minutes=59),
    timedelta(hours=1),
    timedelta(hours=1, minutes=1),
    timedelta(hours=5, minutes=22),
    timedelta(days=1),
    timedelta(days=2, hours=3),
    timedelta(days=7),
    timedelta(days=13, hours=23),
    timedelta(days=22),
    timedelta(days=31),
    timedelta(days=45),
    timedelta(days=200),
    timedelta(days=365),
    timedelta(days=400),
    timedelta(days=1000),
]


@pytest.mark.parametrize("language", ["en-us", "de", "pl"])
def test_relative_times_are_what_timesince_made_of_them(language):
    with translation.override(language):
        for delta in AGO:
            for value in (timezone.now() - delta - MARGIN, timezone.now() + delta + MARGIN):
                assert when(value) == old_when(value), (language, delta, value)
                assert isinstance(when(value), SafeString)


def test_relative_times_follow_the_active_language():
    value = timezone.now() - timedelta(minutes=5) - MARGIN
    with translation.override("de"):
        german = when(value)
    assert "5 Minuten" in german and "5 minutes" in when(value)


def test_a_unit_keeps_its_small_numbers_only():
    """Translated strings are kept per number below ``KEPT_BELOW`` (all but years stay below),
    so years far away (a date a century off) do not grow the cache without end."""
    years = _units("en-us")["year"]
    for number in range(5_000):
        assert years % {"num": number} == (f"{number} year" + ("" if number == 1 else "s"))
    assert 1 in years.said and len(years.said) < 100
