"""Who may open the console, logging in and out, and that nothing is decided by GET or without
a CSRF token."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from agent_core.choices import CallStatus
from approvals.models import DecisionAttempt
from tests.console.conftest import card_html

MEMBER_PAGES = ["console:inbox", "console:mine"]
OPERATOR_PAGES = [
    "console:in_doubt",
    "console:remembered",
    "console:runs",
    "console:audit",
    "console:metrics",
]
PAGES = MEMBER_PAGES + OPERATOR_PAGES


@pytest.mark.parametrize("name", PAGES)
def test_anonymous_users_are_sent_to_the_login_page(client, db, name):
    response = client.get(reverse(name))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("console:login") + "?next=")


@pytest.mark.parametrize("name", OPERATOR_PAGES)
def test_a_user_without_staff_or_a_console_role_is_refused_the_operators_pages(login, name):
    response = login("alice").get(reverse(name))
    assert response.status_code == 403
    assert b"No access to this page" in response.content


@pytest.mark.parametrize("name", MEMBER_PAGES)
def test_any_logged_in_user_opens_the_requesters_pages_without_the_operators_links(login, name):
    response = login("alice").get(reverse(name))
    assert response.status_code == 200
    assert b"My requests" in response.content
    assert reverse("console:audit").encode() not in response.content


@pytest.mark.parametrize("name", PAGES)
def test_staff_and_console_roles_may_open_every_page(login, name):
    assert login("fran").get(reverse(name)).status_code == 200
    assert login("otto").get(reverse(name)).status_code == 200


def test_the_console_roles_come_from_the_setting(login):
    with override_settings(AIRLOCK_CONSOLE={"ROLES": ["auditors"]}):
        assert login("otto").get(reverse("console:audit")).status_code == 403


def test_an_unknown_console_setting_is_an_error(login):
    with (
        override_settings(AIRLOCK_CONSOLE={"ROLE": ["operator"]}),
        pytest.raises(TypeError),
    ):
        login("otto").get(reverse("console:inbox"))


def test_logging_in_lands_on_the_inbox_and_logging_out_needs_a_post(client, people):
    response = client.post(reverse("console:login"), {"username": "fran", "password": "pw"})
    assert response.status_code == 302 and response["Location"] == reverse("console:inbox")
    assert client.get(reverse("console:logout")).status_code == 405
    assert client.post(reverse("console:logout")).status_code == 302
    assert client.get(reverse("console:inbox")).status_code == 302


def test_a_wrong_password_is_refused_on_the_page(client, people):
    response = client.post(reverse("console:login"), {"username": "fran", "password": "nope"})
    assert response.status_code == 200
    assert b"Please enter a correct username and password" in response.content


@pytest.mark.parametrize("action", ["approve", "reject", "edit", "answer", "extend"])
def test_nothing_is_decided_by_get(login, refund, action):
    response = login("fran").get(reverse(f"console:{action}", args=[refund.pk]))
    assert response.status_code == 405
    refund.refresh_from_db()
    assert refund.status == CallStatus.PENDING_APPROVAL
    assert not DecisionAttempt.objects.exists()


def test_a_decision_without_the_csrf_token_is_refused(people, refund):
    client = Client(enforce_csrf_checks=True)
    client.force_login(people["fran"])
    response = client.post(reverse("console:approve", args=[refund.pk]))
    assert response.status_code == 403
    refund.refresh_from_db()
    assert refund.status == CallStatus.PENDING_APPROVAL


def test_every_form_carries_the_csrf_token(login, refund):
    client = login("fran")
    html = client.get(reverse("console:inbox")).content.decode()
    assert (
        html.count('<form method="post"') == html.count("csrfmiddlewaretoken") == 2
    )  # bulk, log out
    card = card_html(client, refund)
    assert card.count('<form method="post"') == card.count("csrfmiddlewaretoken")
    # approve, remember, reject, extend, edit
    assert card.count("csrfmiddlewaretoken") >= 5


@pytest.mark.parametrize("name", ["fran", "otto"])
def test_a_page_reads_the_users_groups_once(login, refund, name):
    # fran is staff (the admin link asks her roles), otto is not (access asks his): both once,
    # with the actor's roles.
    client = login(name)
    with CaptureQueriesContext(connection) as queries:
        assert client.get(reverse("console:inbox")).status_code == 200
    groups = [q["sql"] for q in queries.captured_queries if "auth_user_groups" in q["sql"]]
    assert len(groups) == 1, groups


def test_a_role_granted_between_requests_counts_on_the_next(login, people):
    client = login("alice")
    assert client.get(reverse("console:audit")).status_code == 403
    people["alice"].groups.add(Group.objects.get_or_create(name="operator")[0])
    assert client.get(reverse("console:audit")).status_code == 200
