"""The demo policy end to end through the loop, with the demo agent and the scripted model."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.core.management import call_command
from django.utils import timezone

from agent_core.actors import Actor, actor_for_user
from agent_core.choices import CallStatus, RunStatus
from agent_core.models import Run, ToolCall
from approvals import services as port
from approvals.exceptions import NotApprover
from demo.models import CachePurge, Campaign, Customer, Order, Refund
from tests.conftest import ALICE, FRAN, calls_of, refund
from tests.processes import ROOT

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def demo_policy(settings):
    settings.AGENT = {**settings.AGENT, "APPROVAL_POLICY": "demo.policy.DemoPolicy"}


def test_a_small_refund_needs_no_approval(turn):
    run = turn(refund(19))
    assert run.status == RunStatus.COMPLETED
    [call] = calls_of(run)
    assert call.status == CallStatus.SUCCEEDED and call.decided_via == "policy"
    assert Refund.objects.get().amount == 19


def test_a_larger_refund_needs_finance_within_15_minutes(turn, decide):
    run = turn(refund(20))
    [call] = calls_of(run)
    assert call.status == CallStatus.PENDING_APPROVAL and call.approver == "finance"
    assert call.expires_at is not None
    left = call.expires_at - timezone.now()
    assert timedelta(minutes=14) < left <= timedelta(minutes=15)
    with pytest.raises(NotApprover):
        port.approve(call.pk, actor=ALICE, via="test")
    decide(port.approve, call.pk, actor=FRAN, via="test")
    call.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED and Refund.objects.count() == 1
    # One yes, one call: the next refund in the thread asks again.
    again = turn(refund(25), thread_id=run.thread_id)
    [second] = calls_of(again)
    assert second.status == CallStatus.PENDING_APPROVAL and second.approver == "finance"


def test_a_campaign_needs_marketing_and_shows_the_audience(turn):
    run = turn('/call send_campaign {"campaign_id": "spring-sale"}')
    [call] = calls_of(run)
    assert call.status == CallStatus.PENDING_APPROVAL and call.approver == "marketing"
    assert call.quorum.needed == 2  # the two-person rule
    assert call.expires_at is None
    assert call.confirmation == "Email “Spring sale” to 40,000 people."


def test_a_purge_needs_the_requester_and_can_be_remembered(turn, decide):
    run = turn('/call purge_cache {"path": "/products"}')
    [call] = calls_of(run)
    assert call.approver == "requester"
    decide(port.approve, call.pk, actor=ALICE, via="test", remember=True)
    again = turn('/call purge_cache {"path": "/cart"}', thread_id=run.thread_id)
    [second] = calls_of(again)
    assert second.status == CallStatus.SUCCEEDED and second.decided_via == "remembered"
    assert CachePurge.objects.count() == 2


def test_ask_user_asks(turn):
    run = turn('/call ask_user {"question": "Which order?"}')
    assert calls_of(run)[0].status == CallStatus.PENDING_INPUT


def test_seed_demo_is_rerunnable(db):
    call_command("seed_demo", stdout=StringIO())
    call_command("seed_demo", stdout=StringIO())
    assert Customer.objects.count() == 8 and Order.objects.count() == 8
    vip = Campaign.objects.get(pk="vip-preview")
    assert vip.audience_size == Customer.objects.filter(vip=True, marketing_opt_in=True).count()


@pytest.mark.parametrize(
    ("env", "model"),
    [
        ({}, "scripted:demo"),
        ({"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}, "openai:gpt-4o-mini"),
        (
            {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "AIRLOCK_DEMO_MODEL": "llama3.1"},
            "openai:llama3.1",
        ),
    ],
)
def test_the_demo_uses_an_openai_compatible_endpoint_when_configured(env, model):
    code = "import config.settings.dev as s; print(s.AGENT['MODEL'], s.AGENT['APPROVAL_POLICY'])"
    clean = {
        k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL", "AIRLOCK_DEMO_MODEL")
    }
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out == [model, "demo.policy.DemoPolicy"]


def test_the_demo_emails_approvers_on_the_terminal():
    code = (
        "import config.settings.dev as s; a = s.APPROVALS;"
        "print(s.EMAIL_BACKEND, *a['NOTIFICATION_BACKENDS'], bool(a['BASE_URL']))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == [
        "django.core.mail.backends.console.EmailBackend",
        "approvals.notify.backends.EmailBackend",
        "True",
    ]


def test_a_campaign_emails_both_marketers_and_needs_both_yeses(turn, decide, settings):
    # The demo's notification settings (config/settings/dev.py), its users and campaigns.
    settings.APPROVALS = {
        "NOTIFICATION_BACKENDS": ["approvals.notify.backends.EmailBackend"],
        "BASE_URL": "http://127.0.0.1:8000",
    }
    call_command("seed_demo", stdout=StringIO())
    alice, mia, otto = (
        actor_for_user(User.objects.get(username=name)) for name in ("alice", "mia", "otto")
    )
    run = turn('/call send_campaign {"campaign_id": "spring-sale"}', actor=alice)
    [call] = calls_of(run)
    assert sorted(m.to[0] for m in mail.outbox) == ["mia@airlock.example", "otto@airlock.example"]
    message = mail.outbox[0]
    assert f"send_campaign ({call.pk}), waiting on marketing" in message.subject
    assert "http://127.0.0.1:8000/agent/links/approve/" in message.body
    decide(port.approve, call.pk, actor=mia, via="test")
    call.refresh_from_db()
    assert call.status == CallStatus.PENDING_APPROVAL  # 1 of 2
    decide(port.approve, call.pk, actor=otto, via="test")
    call.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED and call.decided_by_ref == otto.ref


def test_support_has_a_campaign_reviewed_in_parallel_then_sends_it(turn, decide):
    mia = Actor(ref="user:mia", roles=frozenset({"marketing"}))
    run = turn('/call ask_campaign_review {"message": "spring-sale"}')
    review = Run.objects.get(parent_run=run)
    sign_offs = list(ToolCall.objects.filter(run__parent_run=review, tool_name="sign_off"))
    assert len(sign_offs) == 2 and all(c.approver == "marketing" for c in sign_offs)
    for call in sign_offs:
        decide(port.approve, call.pk, actor=mia)
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    [asked] = calls_of(run)
    assert asked.result == "Legal and brand signed it off: it may be sent."
