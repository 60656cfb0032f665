"""Marking an in-doubt call done / not done over REST: through the port, authorized, audited."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agent_core.actors import actor_for_user
from agent_core.choices import CallStatus, RunStatus
from agent_core.models import ToolCall
from approvals.models import DecisionAttempt
from demo.models import CachePurge
from tests.conftest import leave_in_doubt

pytestmark = pytest.mark.django_db

PURGE = '/call purge_cache {"path": "/sale"}'


@pytest.fixture
def doubtful(turn, people) -> ToolCall:
    """alice's own purge (the requester approves it), left in doubt by a worker that died."""
    alice = actor_for_user(people["alice"])
    call = ToolCall.objects.get(run=turn(PURGE, actor=alice))
    leave_in_doubt(call.pk, alice)
    call.refresh_from_db()
    assert call.status == CallStatus.IN_DOUBT
    return call


@pytest.fixture
def post(django_capture_on_commit_callbacks):
    def call(person: User | None, path: str, body: dict) -> tuple[int, dict]:
        client = APIClient()
        if person is not None:
            client.force_authenticate(person)
        with django_capture_on_commit_callbacks(execute=True):
            response = client.post(f"/agent/tool-call/{path}", body, format="json")
        return response.status_code, response.json()

    return call


def test_an_operator_marks_someone_elses_call_done(post, people, doubtful):
    body = {"tool_call_id": doubtful.pk, "result": {"purged": "/sale"}}
    status, answer = post(people["otto"], "mark-done", body)
    assert (status, answer["outcome"], answer["status"]) == (200, "applied", "succeeded")
    doubtful.refresh_from_db()
    assert doubtful.result == {"purged": "/sale"}
    assert doubtful.run.status == RunStatus.COMPLETED
    assert not CachePurge.objects.exists()  # nothing ran again
    attempt = DecisionAttempt.objects.get(action="mark_done")
    assert (attempt.actor_ref, attempt.via, attempt.outcome) == (
        f"user:{people['otto'].pk}",
        "web",
        "applied",
    )
    status, answer = post(people["otto"], "mark-not-done", {"tool_call_id": doubtful.pk})
    assert status == 409 and answer["code"] in ("already_decided", "run_not_active")


def test_the_requester_marks_it_not_done_and_it_runs_again(post, people, doubtful):
    status, answer = post(
        people["alice"], "mark-not-done", {"tool_call_id": doubtful.pk, "via": "api"}
    )
    assert (status, answer["outcome"]) == (200, "applied")
    assert CachePurge.objects.count() == 1
    assert DecisionAttempt.objects.get(action="mark_not_done").via == "api"


def test_someone_else_is_refused_and_audited(post, people, doubtful):
    # bob may not even see the call: unknown to him (SPEC §7), and the attempt audited.
    status, answer = post(people["bob"], "mark-done", {"tool_call_id": doubtful.pk})
    assert (status, answer["code"]) == (404, "not_found")
    assert ToolCall.objects.get(pk=doubtful.pk).status == CallStatus.IN_DOUBT
    assert DecisionAttempt.objects.get(action="mark_done").outcome == "not_found"


def test_bad_input_is_a_clear_4xx_and_changes_nothing(post, people, doubtful):
    assert post(None, "mark-done", {"tool_call_id": doubtful.pk})[0] in (401, 403)
    status, answer = post(people["otto"], "mark-done", {"result": 1})
    assert status == 400 and answer["code"] and answer["detail"]
    status, answer = post(people["otto"], "mark-not-done", {"tool_call_id": "tc_nope"})
    assert (status, answer["code"]) == (404, "not_found")
    assert ToolCall.objects.get(pk=doubtful.pk).status == CallStatus.IN_DOUBT
    assert (
        not DecisionAttempt.objects.filter(action__in=["mark_done", "mark_not_done"])
        .exclude(tool_call_id="tc_nope")
        .exists()
    )
