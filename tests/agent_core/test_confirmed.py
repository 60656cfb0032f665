"""Confirmed tools (SPEC §17): a preview answers a signed single-use confirm_token; the same call
with it commits once; replay, tampering, another actor, other arguments and expiry are refused
with their codes; a failure or a crash between the claim and the effect releases the token."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from decimal import Decimal

import pytest
from django.core import signing

from agent_core.actors import Actor
from agent_core.exceptions import (
    ConfirmTokenExpired,
    ConfirmTokenInvalid,
    ConfirmTokenMismatch,
    ConfirmTokenUsed,
    InvalidArguments,
    NotConfirmable,
    ToolFailed,
)
from agent_core.models import ConfirmedCall
from agent_core.toolcalls import confirmed
from demo.models import Order, Refund
from tests.conftest import ALICE, BOB, wait_for
from tests.durable.conftest import idle_in_transaction
from tests.processes import ROOT, django_env

ARGS = {"order_id": "A-1001", "amount": "10.00"}


def refund(args: dict | None = None, *, actor: Actor = ALICE, token: str | None = None):
    return confirmed.call("support", "issue_refund", args or ARGS, actor=actor, confirm_token=token)


def preview() -> confirmed.Preview:
    found = refund()
    assert isinstance(found, confirmed.Preview)
    return found


@pytest.mark.django_db
def test_a_preview_runs_nothing_and_its_token_commits_once(shop):
    shown = preview()
    assert shown.preview.startswith("Refund 10.00 on order A-1001")
    assert shown.args == {"order_id": "A-1001", "amount": "10.00", "reason": ""}
    assert not Refund.objects.exists()
    done = refund(token=shown.confirm_token)
    assert isinstance(done, confirmed.Committed)
    [made] = Refund.objects.all()
    assert made.amount == Decimal("10.00") and made.tool_call_id == done.confirmation_id
    assert ConfirmedCall.objects.get().result == done.result
    with pytest.raises(ConfirmTokenUsed):  # replay
        refund(token=shown.confirm_token)
    assert Refund.objects.count() == 1


@pytest.mark.django_db
def test_a_token_for_other_args_another_actor_or_tampered_is_refused(shop):
    token = preview().confirm_token
    with pytest.raises(ConfirmTokenMismatch, match="other arguments"):
        refund({**ARGS, "amount": "100.00"}, token=token)
    with pytest.raises(ConfirmTokenMismatch, match="another actor"):
        refund(actor=BOB, token=token)
    with pytest.raises(ConfirmTokenInvalid):
        refund(token=token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1])
    with pytest.raises(ConfirmTokenInvalid):
        refund(token="not-a-token")
    # The same arguments in another order, the default spelled out: the same canonical ones.
    same = {"reason": "", "amount": "10.00", "order_id": "A-1001"}
    assert isinstance(refund(same, token=token), confirmed.Committed)
    assert not ConfirmedCall.objects.exclude(actor_ref=ALICE.ref).exists()


@pytest.mark.django_db
def test_an_expired_token_is_refused(shop):
    claims = signing.loads(preview().confirm_token, salt=confirmed.SALT)
    expired = signing.dumps({**claims, "x": int(time.time()) - 1}, salt=confirmed.SALT)
    with pytest.raises(ConfirmTokenExpired):
        refund(token=expired)
    assert not Refund.objects.exists()


@pytest.mark.django_db
def test_only_confirmed_tools_and_valid_args(shop):
    with pytest.raises(NotConfirmable):
        confirmed.call("support", "purge_cache", {"path": "/"}, actor=ALICE)
    with pytest.raises(InvalidArguments) as raised:
        refund({"order_id": "A-1001", "amount": "-3"})
    assert raised.value.errors


@pytest.mark.django_db
def test_a_tool_that_fails_releases_its_token(shop):
    args = {"order_id": "A-404", "amount": "5.00"}
    token = refund(args).confirm_token
    with pytest.raises(ToolFailed):
        refund(args, token=token)
    assert not ConfirmedCall.objects.exists()
    Order.objects.create(pk="A-404", customer_email="x@example.com", total=Decimal("9.00"))
    assert isinstance(refund(args, token=token), confirmed.Committed)


COMMIT = """
import django, sys
django.setup()
from agent_core.toolcalls import confirmed
from agent_core.actors import Actor
confirmed.call("support", "issue_refund", {"order_id": "A-1001", "amount": "10.00"},
               actor=Actor(ref="user:alice"), confirm_token=sys.argv[1])
"""


@pytest.mark.django_db(transaction=True)
def test_a_crash_between_the_claim_and_the_effect_releases_the_token(shop):
    token = preview().confirm_token
    env = django_env(DEMO_REFUND_DELAY="600")
    proc = subprocess.Popen([sys.executable, "-c", COMMIT, token], cwd=ROOT, env=env)
    try:
        wait_for("the claim's open transaction", lambda: idle_in_transaction() > 0)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not ConfirmedCall.objects.exists() and not Refund.objects.exists()
    assert isinstance(refund(token=token), confirmed.Committed)
    with pytest.raises(ConfirmTokenUsed):
        refund(token=token)
    assert Refund.objects.count() == 1
