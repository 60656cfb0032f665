"""The card's "Approve & remember for…" form: the call's own args pre-filled as pins; a scope
wider than the call is refused on the card and changes nothing."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from agent_core.choices import CallStatus
from approvals.models import RememberedApproval
from tests.console.conftest import card_html

pytestmark = pytest.mark.django_db


def test_the_form_offers_the_calls_args_as_pins(login, refund):
    html = card_html(login("felix"), refund)
    assert reverse("console:remember", args=[refund.pk]) in html
    assert "&quot;order_id&quot;: &quot;A-1001&quot;" in html


def test_remember_for_a_glob_and_uses(login, refund):
    pins = json.dumps({"order_id": "A-*"})
    response = login("felix").post(
        reverse("console:remember", args=[refund.pk]), {"pins": pins, "uses": "5"}
    )
    assert response.status_code == 302
    grant = RememberedApproval.objects.get()
    assert (grant.arg_pins, grant.uses, grant.uses_left) == ({"order_id": "A-*"}, 5, 5)


def test_a_wider_scope_is_refused_on_the_card(login, refund):
    pins = json.dumps({"order_id": "B-*"})
    response = login("felix").post(reverse("console:remember", args=[refund.pk]), {"pins": pins})
    assert response.status_code == 400
    assert b"do not match the approved call" in response.content
    refund.refresh_from_db()
    assert refund.status == CallStatus.PENDING_APPROVAL
    assert not RememberedApproval.objects.exists()


def test_the_evidence_page_shows_each_attempts_digests_and_link(login, refund, people, decide):
    from approvals import evidence
    from approvals import services as port
    from tests.console.conftest import actor

    shown = evidence.CallCard.of(refund).digest
    decide(port.approve, refund.pk, actor=actor(people["felix"]))
    html = login("felix").get(reverse("console:evidence", args=[refund.pk])).content.decode()
    assert f'title="{shown}"' in html and "data-holds" in html and "data-broken" not in html
    assert login("bob").get(reverse("console:evidence", args=[refund.pk])).status_code in (403, 404)
