"""The smaller fixes of issue #19: reasons and answers in the audit, the favicon, the admin."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from agent_core.choices import CallStatus
from agent_core.models import ToolCall
from approvals import services as port
from approvals.exceptions import InvalidDecision
from approvals.models import RememberedApproval
from tests.console.conftest import REFUND, actor, card_html


def test_reject_reasons_and_answers_are_in_the_audit_and_its_csv(login, refund, turn, people):
    port.reject(refund.pk, actor=actor(people["fran"]), reason="Duplicate of A-1001", via="api")
    run = turn('/call ask_user {"question": "Which size?"}', actor=actor(people["otto"]))
    question = ToolCall.objects.get(run=run, tool_name="ask_user")
    port.answer(question.pk, actor=actor(people["otto"]), answer={"answer": "XL"}, via="api")
    html = login("otto").get(reverse("console:audit")).content.decode()
    assert (
        "Reason: Duplicate of A-1001" in html
        and "Answer: {&quot;answer&quot;: &quot;XL&quot;}" in html
    )
    response = login("otto").get(reverse("console:audit_csv"))
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    details = {r["action"]: r["detail"] for r in rows}
    assert details["reject"] == "Duplicate of A-1001" and details["answer"] == '{"answer": "XL"}'


def test_the_favicon_is_linked(login, people):
    html = login("otto").get(reverse("console:inbox")).content.decode()
    assert '<link rel="icon" href="/static/console/favicon.svg"' in html


def test_operators_find_the_admin_linked_and_may_browse_it(login, people):
    User.objects.filter(pk=people["otto"].pk).update(is_staff=True)  # the demo's otto
    people["otto"].refresh_from_db()
    client = login("otto")
    html = client.get(reverse("console:inbox")).content.decode()
    assert f'href="{reverse("admin:index")}"' in html
    index = client.get(reverse("admin:index")).content.decode()
    assert "have permission to view or edit anything" not in index and "Tool calls" in index
    assert client.get(reverse("admin:agent_core_toolcall_changelist")).status_code == 200
    assert client.get(reverse("admin:agent_core_toolcall_add")).status_code == 403


def test_staff_without_a_console_role_get_no_admin_link(login, people):
    html = login("fran").get(reverse("console:inbox")).content.decode()
    assert f'href="{reverse("admin:index")}"' not in html


def test_the_demo_never_remembers_refunds_and_cards_say_how_long_a_grant_lasts(
    login, turn, people, demo_policy, settings
):
    refund = ToolCall.objects.get(run=turn(REFUND, actor=actor(people["alice"])))
    purge = ToolCall.objects.get(
        run=turn('/call purge_cache {"path": "/sale"}', actor=actor(people["fran"]))
    )
    settings.APPROVALS = {"REMEMBER_TTL_BY_TOOL": {"purge_cache": 3600}}
    client = login("fran")
    refund_card, purge_card = card_html(client, refund), card_html(client, purge)
    assert "Approve &amp; remember" not in refund_card
    assert "Approve &amp; remember" in purge_card and "for 1 h 0 min" in purge_card
    with pytest.raises(InvalidDecision):
        port.approve(refund.pk, actor=actor(people["fran"]), remember=True)
    assert ToolCall.objects.get(pk=refund.pk).status == CallStatus.PENDING_APPROVAL
    port.approve(purge.pk, actor=actor(people["fran"]), remember=True)
    grant = RememberedApproval.objects.get()
    assert grant.expires_at is not None
    assert timedelta(minutes=59) < grant.expires_at - timezone.now() <= timedelta(hours=1)
