"""The inbox card of a call that needs two approvals: "1 of 2" after the first yes."""

from __future__ import annotations

import re

from django.urls import reverse

from agent_core.choices import CallStatus
from agent_core.models import ToolCall
from demo.models import MailerSend
from tests.console.conftest import actor, card_html
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
