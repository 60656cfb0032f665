"""Decide from a signed link: confirmation on GET, a decision on POST, once, in time, untampered."""

from __future__ import annotations

import re
import time
from unittest import mock

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.core.mail import EmailMultiAlternatives
from django.test import Client, override_settings

from agent_core.actors import actor_for_user
from agent_core.choices import CallStatus
from agent_core.models import ToolCall
from approvals import links
from approvals import services as port
from approvals.models import DecisionAttempt, LinkUse
from demo.models import Refund
from tests.conftest import REFUND
from tests.factories import make_user

pytestmark = pytest.mark.django_db

EMAIL = "approvals.notify.backends.EmailBackend"
SETTINGS = {
    "RULES": {"issue_refund": {"approver": "finance"}},
    "NOTIFICATION_BACKENDS": [EMAIL],
    "BASE_URL": "https://airlock.example",
}


@pytest.fixture
def fran(db: None) -> User:
    return make_user("fran", "finance", email="fran@example.com")


@pytest.fixture
def emailed(turn, fran) -> tuple[ToolCall, dict[str, str]]:
    """A refund waiting on finance, and the links fran's email carries (paths on this site)."""
    with override_settings(APPROVALS=SETTINGS):
        call = ToolCall.objects.get(run=turn(REFUND))
    [message] = mail.outbox
    assert isinstance(message, EmailMultiAlternatives)
    found = dict(
        re.findall(r"^(Approve|Reject): https://airlock\.example(\S+)$", str(message.body), re.M)
    )
    assert set(found) == {"Approve", "Reject"}, message.body
    html = str(message.alternatives[0][0])
    assert f'href="https://airlock.example{found["Approve"]}"' in html
    return call, {"approve": found["Approve"], "reject": found["Reject"]}


def post(client: Client, url: str, django_capture_on_commit_callbacks, **data: str):
    with django_capture_on_commit_callbacks(execute=True):
        return client.post(url, data)


def test_get_confirms_and_decides_nothing_post_approves_as_the_links_person(
    emailed, fran, django_capture_on_commit_callbacks
):
    call, urls = emailed
    client = Client(enforce_csrf_checks=True)
    page = client.get(urls["approve"])
    assert page.status_code == 200
    html = page.content.decode()
    assert "Approve <code>issue_refund</code>?" in html
    # Whose link it is, in words (issue #35: not ``user:2``).
    assert "deciding as <strong>fran</strong>" in html and actor_for_user(fran).ref not in html
    call.refresh_from_db()
    assert call.status == CallStatus.PENDING_APPROVAL and not DecisionAttempt.objects.exists()

    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)
    assert token is not None
    done = post(
        client, urls["approve"], django_capture_on_commit_callbacks, csrfmiddlewaretoken=token[1]
    )
    assert done.status_code == 200 and b"Approved" in done.content
    call.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED and Refund.objects.count() == 1
    assert (call.decided_by_ref, call.decided_via) == (actor_for_user(fran).ref, "email")
    attempt = DecisionAttempt.objects.get()
    assert (attempt.action, attempt.via, attempt.outcome) == ("approve", "email", "applied")


def test_a_link_works_once_and_spends_its_twin(emailed, django_capture_on_commit_callbacks):
    call, urls = emailed
    client = Client()
    assert (
        post(client, urls["reject"], django_capture_on_commit_callbacks, reason="no").status_code
        == 200
    )
    call.refresh_from_db()
    assert call.status == CallStatus.REJECTED and call.reason == "no"
    for url in (urls["reject"], urls["approve"]):
        again = post(client, url, django_capture_on_commit_callbacks)
        assert again.status_code == 409 and b"already been used" in again.content
    assert client.get(urls["approve"]).status_code == 409  # says so; a GET audits nothing
    outcomes = list(
        DecisionAttempt.objects.order_by("created_at").values_list("outcome", flat=True)
    )
    assert outcomes == ["applied", "link_used", "link_used"]
    assert LinkUse.objects.count() == 1


def test_an_expired_link_decides_nothing_and_is_audited(
    turn, fran, django_capture_on_commit_callbacks
):
    with override_settings(APPROVALS=SETTINGS):
        call = ToolCall.objects.get(run=turn(REFUND))
        yesterday = time.time() - 2 * 24 * 3600
        with mock.patch("django.core.signing.time.time", return_value=yesterday):
            old = links.decision_links(call, actor_for_user(fran).ref, via="email")
        url = old["approve"].removeprefix("https://airlock.example")
        response = post(Client(), url, django_capture_on_commit_callbacks)
    assert response.status_code == 410 and b"expired" in response.content
    call.refresh_from_db()
    assert call.status == CallStatus.PENDING_APPROVAL
    attempt = DecisionAttempt.objects.get()
    assert (attempt.outcome, attempt.tool_call_id, attempt.via) == (
        "link_expired",
        call.pk,
        "email",
    )


@pytest.mark.parametrize("how", ["flip", "other_action"])
def test_a_tampered_link_decides_nothing_and_is_audited(
    emailed, how, django_capture_on_commit_callbacks
):
    call, urls = emailed
    if how == "flip":
        url = urls["approve"][:-3] + ("AAA" if not urls["approve"].endswith("AAA") else "BBB")
    else:  # the reject token under the approve path
        url = urls["reject"].replace("/reject/", "/approve/")
    response = post(Client(), url, django_capture_on_commit_callbacks)
    assert response.status_code == 400 and b"not valid" in response.content
    call.refresh_from_db()
    assert call.status == CallStatus.PENDING_APPROVAL
    assert DecisionAttempt.objects.get().outcome == "link_invalid"


def test_a_link_for_someone_without_the_role_is_refused_unspent(
    turn, fran, django_capture_on_commit_callbacks
):
    bob = User.objects.create_user("bob")
    with override_settings(APPROVALS=SETTINGS):
        call = ToolCall.objects.get(run=turn(REFUND))
        url = links.decision_links(call, actor_for_user(bob).ref, via="slack")["approve"]
    response = post(
        Client(), url.removeprefix("https://airlock.example"), django_capture_on_commit_callbacks
    )
    # The link itself named the call to bob: 403 ``not_approver`` (README), not an unseen 404.
    assert response.status_code == 403 and b'data-code="not_approver"' in response.content
    call.refresh_from_db()
    assert call.status == CallStatus.PENDING_APPROVAL and not LinkUse.objects.exists()
    attempt = DecisionAttempt.objects.get()
    assert (attempt.outcome, attempt.via, attempt.actor_ref) == (
        "not_approver",
        "slack",
        actor_for_user(bob).ref,
    )


def test_a_link_of_a_call_decided_elsewhere_says_so(
    emailed, fran, django_capture_on_commit_callbacks
):
    call, urls = emailed
    with django_capture_on_commit_callbacks(execute=True):
        port.reject(call.pk, actor=actor_for_user(fran), reason="in the inbox")
    response = post(Client(), urls["approve"], django_capture_on_commit_callbacks)
    assert response.status_code == 409 and b"already" in response.content


def test_refused_link_pages_are_rate_limited_and_audit_nothing(emailed, settings):
    """Issue #35: every GET of a bad link wrote a ``DecisionAttempt``, without limit."""
    settings.APPROVALS = {**SETTINGS, "LINK_REFUSAL_RATE": "3/min"}
    _, urls = emailed
    bad = urls["approve"][:-3] + ("AAA" if not urls["approve"].endswith("AAA") else "BBB")
    client = Client(REMOTE_ADDR="203.0.113.35")
    statuses = [client.get(bad).status_code for _ in range(5)]
    assert statuses == [400, 400, 400, 429, 429]
    throttled = client.get(bad)
    assert throttled["Retry-After"] and b'data-code="throttled"' in throttled.content
    assert not DecisionAttempt.objects.exists()
    assert client.get(urls["approve"]).status_code == 200  # a good link still opens
