"""The inbox card of a call that needs two approvals: "1 of 2" after the first yes."""

from __future__ import annotations

import re

from django.urls import reverse

from agent_core.choices import CallStatus
from agent_core.models import ToolCall
from demo.models import MailerSend
from tests.console.conftest import actor, card_html, listed
from tests.factories import make_user

CAMPAIGN = '/call send_campaign {"campaign_id": "spring-sale"}'


def test_a_campaign_shows_its_count_of_approvals_until_the_second(
    client, turn, people, demo_policy, decide
):
    otto, mia = people["otto"], make_user("mia", "marketing", staff=True)
    otto.groups.add(mia.groups.get())
    call = ToolCall.objects.get(run=turn(CAMPAIGN, actor=actor(people["alice"])))
    client.force_login(otto)
    assert "0 of 2 approvals" in card_html(client, call)
    assert "· 0 of 2" in client.get(reverse("console:inbox")).content.decode()  # on its row

    decide(client.post, reverse("console:approve", args=[call.pk]))
    call.refresh_from_db()
    assert call.status == CallStatus.PENDING_APPROVAL
    client.force_login(mia)
    html = card_html(client, call)
    badge = re.search(r"<span class=\"badge quorum\" data-quorum>(.*?)</span>\s*<", html, re.S)
    assert badge, html  # one well-formed element: no markup inside an attribute (issue 42)
    assert badge.group(1).startswith("1 of 2 approvals: ")
    assert "otto approved <time" in badge.group(1)

    decide(client.post, reverse("console:approve", args=[call.pk]))
    call.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED and MailerSend.objects.count() == 1


def test_a_call_the_viewer_approved_waits_on_others_not_on_it(
    client, turn, people, demo_policy, decide
):
    otto = people["otto"]
    otto.groups.add(make_user("mia", "marketing", staff=True).groups.get())
    call = ToolCall.objects.get(run=turn(CAMPAIGN, actor=actor(people["alice"])))
    client.force_login(otto)
    decide(client.post, reverse("console:approve", args=[call.pk]))
    inbox = reverse("console:inbox")
    for params in ({}, {"tool": "send_campaign"}):  # the named first page, a compiled one
        yours = client.get(inbox, params)
        assert listed(yours) == [] and yours.context["listing"].counts["yours"] == 0
        others = client.get(inbox, {**params, "show": "others"})
        assert listed(others) == [call.pk] and others.context["listing"].counts["others"] == 1
    api = client.get("/agent/approvals/pending").json()["results"]
    assert api == []
    html = card_html(client, call)
    assert "1 of 2 approvals" in html
    assert reverse("console:approve", args=[call.pk]) not in html  # no Approve for otto now
