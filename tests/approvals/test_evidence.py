"""Evidence (SPEC §19): digests on every attempt, the hash chain, verify_audit naming the first
tampered row, the JSON-lines export; the args approved are the args that ran, edited ones too."""

from __future__ import annotations

import io
import json
import threading

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, transaction

from agent_core.tools import args_digest
from approvals import evidence
from approvals import services as port
from approvals.models import Action, DecisionAttempt
from demo.models import CachePurge
from tests.conftest import ALICE, BOB, calls_of

pytestmark = pytest.mark.django_db

PURGE = '/call purge_cache {"path": "/products/shoes"}'


def verify() -> str:
    out = io.StringIO()
    call_command("approvals", "verify_audit", stdout=out)
    return out.getvalue()


def test_an_approval_records_what_was_shown_the_policy_and_the_args(turn, decide):
    [call] = calls_of(turn(PURGE))
    shown = evidence.CallCard.of(call).digest
    decide(port.approve, call.pk, actor=ALICE)
    row = DecisionAttempt.objects.get(action=Action.APPROVE)
    assert row.card_digest == shown and len(shown) == 64
    assert row.policy_digest == evidence.policy_digest()
    assert row.args_digest == args_digest("purge_cache", {"path": "/products/shoes"})
    assert (row.seq, row.prev_digest) == (1, evidence.GENESIS)
    assert "the audit chain is whole: 1 rows" in verify()


def test_the_executed_args_are_the_edited_args_approved(turn, decide):
    [call] = calls_of(turn(PURGE))
    decide(port.approve, call.pk, actor=ALICE, args={"path": "/products/hats"})
    call.refresh_from_db()
    row = DecisionAttempt.objects.get(action=Action.APPROVE)
    assert row.args_digest == call.args_digest == args_digest("purge_cache", call.args)
    assert call.executed_args_digest == row.args_digest  # stamped by the claim that ran it
    assert CachePurge.objects.get().path == "/products/hats"  # what ran
    assert (
        row.card_digest
        == evidence.CallCard.of(
            call.__class__(**{**_fields(call), "args": call.original_args})
        ).digest
    )  # the card showed the args as proposed


def _fields(call):
    return {f.attname: getattr(call, f.attname) for f in call._meta.concrete_fields}


def test_verify_audit_names_the_first_tampered_row(turn, decide):
    [call] = calls_of(turn(PURGE))
    with pytest.raises(Exception):  # noqa: B017 (a refusal is audited too)
        decide(port.approve, call.pk, actor=BOB)
    decide(port.reject, call.pk, actor=ALICE, reason="not now")
    decide(port.reject, call.pk, actor=ALICE, reason="not now")
    rows = list(DecisionAttempt.objects.order_by("seq"))
    assert [r.seq for r in rows] == [1, 2, 3]
    verify()
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE approvals_decisionattempt SET detail = 'changed' WHERE id = %s", [rows[1].pk]
        )
    with pytest.raises(CommandError, match=f"breaks at row 2 \\(id {rows[1].pk}\\)"):
        verify()
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM approvals_decisionattempt WHERE id = %s", [rows[1].pk])
    with pytest.raises(CommandError, match=r"breaks at row 3 .* rows are missing"):
        verify()


def test_the_export_is_json_lines_of_the_chain(turn, decide):
    [call] = calls_of(turn(PURGE))
    decide(port.approve, call.pk, actor=ALICE)
    out = io.StringIO()
    call_command("approvals", "export_audit", stdout=out)
    [line] = [json.loads(x) for x in out.getvalue().splitlines()]
    assert line["tool_call_id"] == call.pk and line["seq"] == 1 and len(line["digest"]) == 64


@pytest.mark.django_db(transaction=True)
def test_concurrent_attempts_keep_one_unbroken_chain():
    barrier = threading.Barrier(8)

    def append(i: int) -> None:
        try:
            barrier.wait()
            for _ in range(5):
                with transaction.atomic():
                    DecisionAttempt.objects.create(
                        tool_call_id=f"tc_{i}", action=Action.APPROVE, actor_ref="x", via="api"
                    )
        finally:
            connection.close()

    threads = [threading.Thread(target=append, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert "the audit chain is whole: 40 rows" in verify()


def test_the_api_renders_the_card_that_is_hashed(turn, people):
    from django.utils.dateparse import parse_datetime

    from tests.approvals.rest import actor, get

    [call] = calls_of(turn(PURGE, actor=actor(people["alice"])))
    status, page = get(people["alice"], "/agent/approvals/pending")
    assert status == 200
    [row] = page["results"]
    expires = parse_datetime(row["expires_at"]) if row["expires_at"] else None
    fields = ("tool_name", "args", "summary", "confirmation", "approver", "approvals_needed")
    rendered = evidence.CallCard(expires_at=expires, **{name: row[name] for name in fields})
    assert rendered.digest == evidence.CallCard.of(call).digest
