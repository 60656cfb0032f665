"""A question (``ask_user``) notifies the person asked with a signed link that opens a form to
answer it (issue 42, item 5): as a decision link, signed, for one person, once."""

from __future__ import annotations

import re

import pytest
from django.core import mail
from django.test import Client, override_settings

from agent_core.actors import actor_for_user
from agent_core.choices import CallStatus
from agent_core.models import ToolCall
from approvals.models import DecisionAttempt
from tests.factories import make_user

pytestmark = pytest.mark.django_db

SETTINGS = {
    "NOTIFICATION_BACKENDS": ["approvals.notify.backends.EmailBackend"],
    "BASE_URL": "https://airlock.example",
}
QUESTION = '/call ask_user {"question": "Which order?"}'


def test_a_question_emails_its_person_a_link_that_answers_it_once(
    turn, django_capture_on_commit_callbacks
):
    alice = make_user("alice", email="alice@example.com")
    with override_settings(APPROVALS=SETTINGS):
        call = ToolCall.objects.get(run=turn(QUESTION, actor=actor_for_user(alice)))
    [message] = mail.outbox
    assert message.to == ["alice@example.com"]
    assert "Question for you: ask_user" in message.subject
    found = re.search(r"^Answer: https://airlock\.example(\S+)$", str(message.body), re.M)
    assert found is not None, message.body
    url = found[1]

    client = Client()
    page = client.get(url)
    assert page.status_code == 200
    assert b"Which order?" in page.content and b'name="answer"' in page.content
    assert not DecisionAttempt.objects.exists()

    with django_capture_on_commit_callbacks(execute=True):
        refused = client.post(url, {"answer": ""})  # the schema wants at least one character
    assert refused.status_code == 400
    with django_capture_on_commit_callbacks(execute=True):
        done = client.post(url, {"answer": "A-1003"})
    assert done.status_code == 200 and b"Answered" in done.content
    call.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED and call.result == {"answer": "A-1003"}
    assert call.decided_via == "email"

    again = client.post(url, {"answer": "A-1004"})
    assert again.status_code == 409  # the link works once
