"""Notifications: email through Django's framework, signed webhooks, retries, opt-out."""

from __future__ import annotations

import threading
import time

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from agent_core.actors import actor_for_user
from agent_core.engine import runs
from agent_core.engine.dispatch import set_runner
from agent_core.models import ToolCall
from agent_core.runner.inline import InlineRunner
from approvals import services
from approvals.checks import check_approvals_settings
from approvals.models import Delivery, NotificationOptOut
from approvals.notify import signing
from approvals.notify.backends import configured_backends
from tests.approvals.receiver import SECRET
from tests.conftest import ALICE, REFUND, leave_in_doubt
from tests.factories import make_user

EMAIL = "approvals.notify.backends.EmailBackend"
FINANCE = {"issue_refund": {"approver": "finance"}}


def webhook(url: str, **options: object) -> dict:
    return {
        "BACKEND": "approvals.notify.backends.WebhookBackend",
        "OPTIONS": {"URL": url, "SECRET": SECRET, **options},
    }


@pytest.fixture
def finance(db: None) -> dict[str, User]:
    people = {
        "fran": make_user("fran", "finance", email="fran@example.com", first_name="Fran"),
        "felix": make_user("felix", "finance", email="felix@example.com"),
        "nomail": make_user("nomail", "finance"),
    }
    make_user("bob", email="bob@example.com")  # not in finance
    return people


@pytest.mark.django_db
@override_settings(APPROVALS={"RULES": FINANCE, "NOTIFICATION_BACKENDS": [EMAIL]})
def test_the_approver_role_is_emailed_once_each_except_who_opted_out(turn, finance):
    NotificationOptOut.objects.create(actor_ref=actor_for_user(finance["felix"]).ref)
    call = ToolCall.objects.get(run=turn(REFUND))
    [message] = mail.outbox
    assert message.to == ["fran@example.com"]
    assert message.subject == (
        f"[Airlock] Approval needed: issue_refund ({call.pk}), waiting on finance"
    )
    assert "Hello Fran" in message.body and '"order_id": "A-1001"' in message.body
    assert message.alternatives[0].mimetype == "text/html"  # type: ignore[attr-defined]
    rows = {d.recipient_ref: d for d in Delivery.objects.filter(tool_call=call)}
    fran, nomail = (actor_for_user(finance[n]).ref for n in ("fran", "nomail"))
    assert set(rows) == {fran, nomail}
    assert (rows[fran].status, rows[fran].attempts, rows[fran].channel) == ("sent", 1, "email")
    # Without an address nothing can be sent: recorded as failed at once, never retried.
    assert (rows[nomail].status, rows[nomail].attempts) == ("failed", 1)
    assert "cannot reach" in rows[nomail].error


def written_by(delivery: Delivery) -> tuple[str, str]:
    """The transactions that last wrote ``delivery`` and its call (PostgreSQL's ``xmin``)."""
    statement = (
        f"SELECT d.xmin::text, c.xmin::text FROM {Delivery._meta.db_table} d"
        f" JOIN {ToolCall._meta.db_table} c ON c.id = d.tool_call_id WHERE d.id = %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(statement, [delivery.pk])
        return cursor.fetchone()


def delivery_writes(queries: CaptureQueriesContext) -> list[str]:
    table = Delivery._meta.db_table
    return [
        q["sql"].split()[0]
        for q in queries.captured_queries
        if table in q["sql"] and not q["sql"].startswith("SELECT")
    ]


@pytest.mark.django_db(transaction=True)
@override_settings(APPROVALS={"RULES": FINANCE, "NOTIFICATION_BACKENDS": [EMAIL]})
def test_an_approver_without_an_address_is_recorded_in_the_suspend_transaction(shop, sync_runner):
    make_user("nomail", "finance")
    with CaptureQueriesContext(connection) as queries:
        run = runs.start_run(agent="support", message=REFUND, actor=ALICE)
    delivery = Delivery.objects.get(tool_call__run=run)
    assert (delivery.status, delivery.attempts) == ("failed", 1)
    assert delivery.error == f"email cannot reach {delivery.recipient_ref}"
    # Nothing can be sent, so nothing more is written: the row commits with the call that asks.
    delivery_xmin, call_xmin = written_by(delivery)
    assert delivery_xmin == call_xmin
    assert delivery_writes(queries) == ["INSERT"]


@pytest.mark.django_db(transaction=True)
@override_settings(APPROVALS={"RULES": FINANCE, "NOTIFICATION_BACKENDS": [EMAIL]})
def test_a_sent_notification_is_recorded_with_the_request_claimed_and_settled(shop, sync_runner):
    make_user("fran", "finance", email="fran@example.com")
    with CaptureQueriesContext(connection) as queries:
        run = runs.start_run(agent="support", message=REFUND, actor=ALICE)
    [message] = mail.outbox
    delivery = Delivery.objects.get(tool_call__run=run)
    assert (delivery.status, delivery.attempts, delivery.error) == ("sent", 1, "")
    assert message.to == ["fran@example.com"] and delivery.sent_at is not None
    # The attempt is counted before it sends (a send that never finishes still counts), then
    # its outcome is recorded.
    assert delivery_writes(queries) == ["INSERT", "UPDATE", "UPDATE"]


@pytest.mark.django_db(transaction=True)
@override_settings(APPROVALS={"NOTIFICATION_BACKENDS": [EMAIL]})
def test_a_call_that_asks_again_records_its_notification_with_the_new_request(shop, sync_runner):
    alice = actor_for_user(User.objects.create_user("alice"))  # no address
    run = runs.start_run(agent="crash", message='/call purge_strict {"path": "/p"}', actor=alice)
    call = ToolCall.objects.get(run=run)
    leave_in_doubt(call.pk, alice)
    assert services.mark_not_done(call.pk, actor=alice).result == "applied"
    first, again = Delivery.objects.filter(tool_call=call).order_by("id")
    assert (again.status, again.event, again.error) == ("failed", "approval-requested", first.error)
    delivery_xmin, call_xmin = written_by(again)
    assert delivery_xmin == call_xmin  # the transaction that asked afresh


@pytest.mark.django_db
@override_settings(APPROVALS={"NOTIFICATION_BACKENDS": [EMAIL]})
def test_a_requester_approval_is_emailed_to_the_requester(turn):
    alice = User.objects.create_user("alice", email="alice@example.com")
    turn(REFUND, actor=actor_for_user(alice))
    assert [m.to for m in mail.outbox] == [["alice@example.com"]]


@pytest.mark.django_db
def test_a_signed_json_webhook_reaches_the_receiver(turn, finance, receiver):
    with override_settings(
        APPROVALS={"RULES": FINANCE, "NOTIFICATION_BACKENDS": [webhook(receiver.url)]}
    ):
        call = ToolCall.objects.get(run=turn(REFUND))
    [hit] = receiver.received
    assert hit["verified"]
    body = hit["body"]
    assert (body["event"], body["tool_call_id"], body["approver"]) == (
        "approval-requested",
        call.pk,
        "finance",
    )
    assert body["args"]["order_id"] == "A-1001" and body["recipient"] is None
    delivery = Delivery.objects.get(tool_call=call)
    assert (delivery.status, delivery.recipient_ref, delivery.attempts) == ("sent", "", 1)


@pytest.mark.django_db
def test_the_slack_format_posts_blocks_once_per_person(turn, finance, receiver):
    backends = [webhook(receiver.url, FORMAT="slack", PER_RECIPIENT=True, NAME="slack")]
    with override_settings(APPROVALS={"RULES": FINANCE, "NOTIFICATION_BACKENDS": backends}):
        turn(REFUND)
    assert len(receiver.received) == 3 and all(h["verified"] for h in receiver.received)
    payload = receiver.received[0]["body"]
    assert payload["text"].startswith("Approval needed: issue_refund")
    kinds = [block["type"] for block in payload["blocks"]]
    assert kinds[:3] == ["section", "section", "context"]
    assert set(Delivery.objects.values_list("channel", flat=True)) == {"slack"}


def test_signatures_verify_and_refuse_tampering_and_replays():
    body = b'{"a":1}'
    header = signing.signature("s3cret", body, int(time.time()))
    assert signing.verify("s3cret", body, header)
    assert not signing.verify("s3cret", b'{"a":2}', header)
    assert not signing.verify("other", body, header)
    assert not signing.verify("s3cret", body, header, now=time.time() + 600)
    assert not signing.verify("s3cret", body, "v1=abc")


@pytest.mark.parametrize(
    "backends",
    [
        ["no.such.Backend"],
        [{"BACKEND": "approvals.notify.backends.WebhookBackend", "OPTIONS": {"URL": "x"}}],
        [webhook("http://127.0.0.1:9", FORMAT="xml")],
        [EMAIL, EMAIL],
        [42],
    ],
)
def test_a_bad_backend_list_is_reported(backends):
    with override_settings(APPROVALS={"NOTIFICATION_BACKENDS": backends}):
        with pytest.raises(ImproperlyConfigured):
            configured_backends()


@pytest.mark.django_db(transaction=True)
def test_a_failing_webhook_is_retried_with_backoff_and_recorded_as_failed(shop, finance, receiver):
    receiver.status = 500
    runner = InlineRunner(workers=2)
    set_runner(runner)
    settings = {
        "RULES": FINANCE,
        "NOTIFICATION_BACKENDS": [webhook(receiver.url)],
        "NOTIFICATION_ATTEMPTS": 3,
        "NOTIFICATION_BACKOFF": 0.05,
    }
    try:
        with override_settings(APPROVALS=settings):
            runs.start_run(agent="support", message=REFUND, actor=ALICE)
            deadline = time.monotonic() + 30
            while not Delivery.objects.filter(status="failed").exists():
                assert time.monotonic() < deadline, list(Delivery.objects.values())
                threading.Event().wait(0.05)
    finally:
        runner.shutdown()
        set_runner(None)
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts) == ("failed", 3)
    assert delivery.error.startswith("DeliveryFailed: HTTP 500")
    assert len(receiver.received) == 3 and all(h["verified"] for h in receiver.received)


@pytest.mark.django_db
def test_a_person_opts_out_and_back_in_over_the_api():
    fran = User.objects.create_user("fran")
    client = APIClient()
    client.force_authenticate(fran)
    url = "/agent/notifications/preferences"
    assert client.get(url).json() == {"opted_out": False}
    assert client.put(url, {"opted_out": True}, format="json").json() == {"opted_out": True}
    assert NotificationOptOut.objects.get().actor_ref == actor_for_user(fran).ref
    bad = client.put(url, {"opted_out": "yes"}, format="json")
    assert bad.status_code == 400 and bad.json()["code"] == "invalid"
    assert NotificationOptOut.objects.count() == 1
    assert client.put(url, {"opted_out": False}, format="json").json() == {"opted_out": False}
    assert not NotificationOptOut.objects.exists()
    assert APIClient().get(url).status_code == 401


def test_the_system_checks_report_bad_backends_and_a_missing_base_url():
    with override_settings(APPROVALS={"NOTIFICATION_BACKENDS": ["no.such.Backend"]}):
        assert [m.id for m in check_approvals_settings()] == ["approvals.E005"]
    with override_settings(APPROVALS={"NOTIFICATION_BACKENDS": [EMAIL]}):
        assert [m.id for m in check_approvals_settings()] == ["approvals.W002"]
    with override_settings(APPROVALS={"NOTIFICATION_BACKENDS": [EMAIL], "BASE_URL": "https://a.b"}):
        assert check_approvals_settings() == []
