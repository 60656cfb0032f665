"""The two-person rule (N of M): approvals counted as they come, through the real loop and API."""

from __future__ import annotations

import subprocess

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from rest_framework.test import APIClient

from agent_core.actors import Actor, actor_for_user
from agent_core.choices import CallStatus, RunStatus
from agent_core.engine import runs
from agent_core.models import Run, StreamFrame, ToolCall
from approvals import services as port
from approvals.exceptions import InvalidDecision, NotApprover
from approvals.models import Approval, DecisionAttempt
from approvals.rules import parse_rules
from approvals.selectors import pending_for
from demo.models import Refund
from tests.conftest import ALICE, REFUND, calls_of
from tests.factories import make_user
from tests.processes import MANAGE, ROOT, django_env

FRAN = Actor(ref="user:fran", roles=frozenset({"finance"}))
FINN = Actor(ref="user:finn", roles=frozenset({"finance"}))
LEA = Actor(ref="user:lea", roles=frozenset({"legal"}))
# A guard against a hung child, not a timing assertion: four Django processes start at once.
GUARD = 300
TWO_FINANCE = {"RULES": {"issue_refund": {"approver": "finance", "quorum": 2}}}


def progress_frames(run: Run) -> list[dict]:
    return [
        f.data
        for f in StreamFrame.objects.filter(run=run, kind="approval-progress").order_by("seq")
    ]


@pytest.mark.django_db
@override_settings(APPROVALS=TWO_FINANCE)
def test_the_first_yes_is_recorded_and_the_call_waits_for_the_second(turn, decide):
    run = turn(REFUND)
    [call] = calls_of(run)
    assert decide(port.approve, call.pk, actor=FRAN, via="api").result == port.Result.APPLIED
    call.refresh_from_db()
    assert call.status == CallStatus.PENDING_APPROVAL and Refund.objects.count() == 0
    [frame] = progress_frames(run)
    assert frame["needed"] == 2 and [a["by"] for a in frame["approvals"]] == ["user:fran"]
    assert DecisionAttempt.objects.get().detail == "1 of 2 approvals"

    assert decide(port.approve, call.pk, actor=FINN, via="api").result == port.Result.APPLIED
    call.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED and Refund.objects.count() == 1
    assert call.decided_by_ref == "user:finn"
    assert list(Approval.objects.values_list("by_ref", flat=True)) == ["user:fran", "user:finn"]
    details = DecisionAttempt.objects.order_by("created_at").values_list("detail", flat=True)
    assert list(details) == ["1 of 2 approvals", "2 of 2 approvals"]


@pytest.mark.django_db
@override_settings(APPROVALS=TWO_FINANCE)
def test_the_same_person_twice_counts_once(turn, decide):
    run = turn(REFUND)
    [call] = calls_of(run)
    decide(port.approve, call.pk, actor=FRAN)
    assert decide(port.approve, call.pk, actor=FRAN).result == port.Result.UNCHANGED
    call.refresh_from_db()
    assert call.status == CallStatus.PENDING_APPROVAL and Approval.objects.count() == 1
    assert len(progress_frames(run)) == 1


@pytest.mark.django_db
@override_settings(APPROVALS=TWO_FINANCE)
def test_any_reject_rejects(turn, decide):
    run = turn(REFUND)
    [call] = calls_of(run)
    decide(port.approve, call.pk, actor=FRAN)
    decide(port.reject, call.pk, actor=FINN, reason="not this one")
    call.refresh_from_db()
    assert call.status == CallStatus.REJECTED and Refund.objects.count() == 0


@pytest.mark.django_db
@override_settings(APPROVALS=TWO_FINANCE)
def test_the_requester_does_not_count_unless_the_policy_says_so(turn, decide):
    alice = Actor(ref=ALICE.ref, roles=frozenset({"finance"}))
    [call] = calls_of(turn(REFUND, actor=alice))
    with pytest.raises(NotApprover):
        decide(port.approve, call.pk, actor=alice)
    assert Approval.objects.count() == 0
    assert DecisionAttempt.objects.get().outcome == "not_approver"

    rules = {"issue_refund": {"approver": "finance", "quorum": 2, "requester_counts": True}}
    with override_settings(APPROVALS={"RULES": rules}):
        [counted] = calls_of(turn(REFUND, actor=alice))
        decide(port.approve, counted.pk, actor=alice)
        decide(port.approve, counted.pk, actor=FRAN)
    counted.refresh_from_db()
    assert counted.status == CallStatus.SUCCEEDED


@pytest.mark.django_db
@override_settings(
    APPROVALS={"RULES": {"issue_refund": {"approver": ["finance", "legal"], "quorum": 2}}}
)
def test_approvers_may_come_from_several_roles(turn, decide):
    run = turn(REFUND)
    [call] = calls_of(run)
    assert call.approver == "finance|legal"
    assert list(pending_for(LEA)) == [call]
    assert list(pending_for(Actor(ref="user:x", roles=frozenset({"legalese"})))) == []
    decide(port.approve, call.pk, actor=LEA)
    decide(port.approve, call.pk, actor=FRAN)
    call.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED


@pytest.mark.django_db
@override_settings(APPROVALS=TWO_FINANCE)
def test_a_quorum_call_is_neither_remembered_nor_edited(turn, decide):
    [call] = calls_of(turn(REFUND))
    with pytest.raises(InvalidDecision):
        decide(port.approve, call.pk, actor=FRAN, remember=True)
    with pytest.raises(InvalidDecision):
        decide(port.approve, call.pk, actor=FRAN, args={"order_id": "A-1001", "amount": 5})
    assert Approval.objects.count() == 0


@pytest.mark.parametrize(
    "rule",
    [
        {"approver": "finance", "quorum": 0},
        {"approver": "finance", "quorum": "2"},
        {"approver": "requester", "quorum": 2},
        {"approver": ["finance", "requester"], "quorum": 2},
        {"approver": ["finance", 3]},
        {"approver": "finance", "requester_counts": "yes"},
    ],
)
def test_a_bad_quorum_rule_is_reported(rule):
    with pytest.raises(ImproperlyConfigured):
        parse_rules({"issue_refund": rule})


@pytest.mark.django_db
@override_settings(APPROVALS=TWO_FINANCE)
def test_the_api_shows_who_approved_and_how_many_are_needed(
    turn, django_capture_on_commit_callbacks
):
    fran = make_user("fran", "finance")
    [call] = calls_of(turn(REFUND))
    client = APIClient()
    client.force_authenticate(fran)
    with django_capture_on_commit_callbacks(execute=True):
        body = client.post(
            "/agent/tool-call/approve", {"tool_call_id": call.pk}, format="json"
        ).json()
    assert body["status"] == "pending_approval" and body["approvals_needed"] == 2
    assert [a["by"] for a in body["approvals"]] == [actor_for_user(fran).ref]
    # It waits on another of finance now, not on fran (issue 42).
    assert client.get("/agent/approvals/pending").json()["results"] == []
    client.force_authenticate(make_user("felix", "finance"))
    [pending] = client.get("/agent/approvals/pending").json()["results"]
    assert pending["approvals_needed"] == 2 and len(pending["approvals"]) == 1


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@override_settings(APPROVALS={"RULES": {"issue_refund": {"approver": "finance", "quorum": 3}}})
def test_concurrent_approvals_on_separate_processes_each_count_once(shop, sync_runner):
    for name in ["fran", "finn", "fred"]:
        make_user(name, "finance")
    run = runs.start_run(agent="support", message=REFUND, actor=ALICE)
    [call] = calls_of(run)
    # Two people at once, each twice: four processes racing on one call.
    procs = [
        subprocess.Popen(
            [*MANAGE, "agent", "approve", call.pk, "--as", name],
            cwd=ROOT,
            env=django_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ["fran", "finn", "fran", "finn"]
    ]
    outputs = [p.communicate(timeout=GUARD) for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    outcomes = sorted(out.strip().rsplit(": ", 1)[1] for out, _ in outputs)
    assert outcomes == ["applied", "applied", "unchanged", "unchanged"]
    call.refresh_from_db()
    assert call.status == CallStatus.PENDING_APPROVAL
    assert sorted(Approval.objects.values_list("by_ref", flat=True)) == sorted(
        actor_for_user(User.objects.get(username=n)).ref for n in ("fran", "finn")
    )
    assert (
        subprocess.run(
            [*MANAGE, "agent", "approve", call.pk, "--as", "fred"],
            cwd=ROOT,
            env=django_env(),
            capture_output=True,
            timeout=GUARD,
            check=False,
        ).returncode
        == 0
    )
    call.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED and Refund.objects.count() == 1
    assert Run.objects.get(pk=run.pk).status == RunStatus.COMPLETED
    assert ToolCall.objects.count() == 1
