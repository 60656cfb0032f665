"""The console's login is throttled (django-axes): password guessing gets locked out."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from console.checks import check_login_throttled

pytestmark = pytest.mark.django_db

LIMIT = 5  # AXES_FAILURE_LIMIT


def _log_in(client: Client, username: str, password: str) -> Any:
    return client.post(reverse("console:login"), {"username": username, "password": password})


def test_a_correct_password_before_the_limit_still_signs_in(people):
    client = Client()
    for _ in range(LIMIT - 1):
        wrong = _log_in(client, "fran", "guess")
        assert wrong.status_code == 200 and b"Please enter a correct username" in wrong.content
    signed_in = _log_in(client, "fran", "pw")
    assert signed_in.status_code == 302 and signed_in["Location"] == reverse("console:inbox")
    # and the count starts again: four more wrong guesses are not a lockout either
    other = Client()
    assert [_log_in(other, "fran", "guess").status_code for _ in range(LIMIT - 1)] == [200] * 4


def test_repeated_wrong_passwords_are_locked_out_with_a_clear_page(people):
    client = Client()
    codes = [_log_in(client, "fran", "guess").status_code for _ in range(LIMIT)]
    assert codes == [200] * (LIMIT - 1) + [429]
    locked = _log_in(client, "fran", "pw")  # even the right password, while locked
    assert locked.status_code == 429
    page = locked.content.decode()
    assert "Too many sign-in attempts" in page and "5 wrong passwords" in page
    assert "0:15:00" in page and "fran" in page
    assert "_auth_user_id" not in client.session
    assert _log_in(Client(), "felix", "pw").status_code == 302  # others are not locked out


def test_the_project_settings_throttle_the_login():
    assert check_login_throttled() == []


def test_without_axes_the_console_warns(settings):
    settings.AUTHENTICATION_BACKENDS = ["django.contrib.auth.backends.ModelBackend"]
    assert [m.id for m in check_login_throttled()] == ["console.W001"]
