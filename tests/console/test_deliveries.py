"""The console's notifications page: every delivery, sent or failed, with its tries and error."""

from __future__ import annotations

import pytest
from django.test import override_settings
from django.urls import reverse

from agent_core.models import ToolCall
from approvals.models import Delivery, DeliveryStatus
from tests.console.conftest import REFUND, actor

EMAIL = {
    "NOTIFICATION_BACKENDS": ["approvals.notify.backends.EmailBackend"],
    "BASE_URL": "https://airlock.example",
}


@pytest.fixture
def notified(turn, people, finance_policy) -> ToolCall:
    """A refund waiting on finance: fran (who has an address) is emailed, felix cannot be."""
    people["fran"].email = "fran@example.com"
    people["fran"].save()
    with override_settings(APPROVALS=EMAIL):
        return ToolCall.objects.get(run=turn(REFUND, actor=actor(people["alice"])))


def listed(client, **query: str) -> list[Delivery]:
    return list(client.get(reverse("console:deliveries"), query).context["results"].rows)


@pytest.mark.django_db
def test_an_operator_sees_every_delivery_sent_and_failed_with_filters(login, people, notified):
    client = login("otto")
    page = client.get(reverse("console:deliveries"))
    assert page.status_code == 200
    html = page.content.decode()
    assert 'href="/console/deliveries/" aria-current="page">Notifications</a>' in html
    rows = {d.recipient_ref: d for d in page.context["results"].rows}
    fran, felix = (rows[actor(people[name]).ref] for name in ("fran", "felix"))
    assert (fran.status, fran.attempts, fran.channel) == (DeliveryStatus.SENT, 1, "email")
    assert felix.status == DeliveryStatus.FAILED and "cannot reach" in felix.error
    assert "Last error: email cannot reach" in html and notified.pk in html
    assert [d.pk for d in listed(client, status="failed")] == [felix.pk]
    assert [d.pk for d in listed(client, recipient="fran")] == [fran.pk]
    assert len(listed(client, call=notified.pk)) == 2 and listed(client, channel="slack") == []


@pytest.mark.django_db
def test_others_see_the_deliveries_of_the_calls_they_see(login, people, notified):
    # fran approves the call (finance): she sees its deliveries; alice's run too (no console
    # access for her, though); a console user who sees neither sees none.
    assert len(listed(login("fran"))) == 2
    people["alice"].is_staff = True
    people["alice"].save()
    assert len(listed(login("alice"))) == 2
    people["otto"].groups.clear()
    people["otto"].is_staff = True
    people["otto"].save()
    assert listed(login("otto")) == []
    assert login("otto").get(reverse("console:deliveries")).status_code == 200


@pytest.mark.django_db
def test_the_run_page_shows_each_calls_deliveries(login, notified):
    page = login("fran").get(reverse("console:run", args=[notified.run_id])).content.decode()
    assert "Notifications (2)" in page
    assert f"/console/deliveries/?call={notified.pk}" in page
