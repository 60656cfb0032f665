"""The pending inbox read as row tuples (``approvals.pending``) and serialized by a plain function:
the same answer as the documented ``PendingCallSerializer`` over model instances, for every kind
of row (several roles and a quorum part-way, a deadline, a question, a delegated call)."""

from __future__ import annotations

from datetime import timedelta
from functools import reduce
from operator import or_

import pytest
from django.db.models import Q
from django.test import override_settings

from agent_core.actors import Actor
from approvals import pending, quorum, selectors
from approvals import services as port
from approvals.api.filters import PendingPagination
from approvals.api.serializers import PendingCallSerializer, pending_results
from tests.agent_core.test_delegation import REFUND_10, ask
from tests.conftest import ALICE, REFUND, calls_of

pytestmark = pytest.mark.django_db

LEA = Actor(ref="user:lea", roles=frozenset({"legal"}))
LEGAL_AND_FINANCE = {
    "RULES": {
        "issue_refund": {
            "when": {"amount__lt": 20},
            "approver": ["finance", "legal"],
            "quorum": 2,
            "ttl": timedelta(hours=1),
        }
    }
}


@override_settings(APPROVALS=LEGAL_AND_FINANCE)
def test_plain_rows_serialize_as_the_documented_serializer_does(turn, desk, decide):
    [several] = calls_of(turn(REFUND))
    decide(port.approve, several.pk, actor=LEA)  # one of two: still pending, "1 of 2"
    [question] = calls_of(turn('/call ask_user {"question": "Which order?"}'))
    delegating = desk(ask("ask_billing", REFUND_10))
    [delegated] = calls_of(selectors.pending_calls().get(run__parent_run=delegating).run)
    pagination = PendingPagination()
    branches = selectors.decidable_by(Actor(ref=ALICE.ref, roles=frozenset({"legal"})))
    page = pending.page(selectors.pending_calls(), {}, pagination, branches=branches)

    models = list(quorum.with_needed(selectors.pending_calls()).order_by("requested_at", "id"))
    quorum.attach(models)
    expected = PendingCallSerializer(models, many=True).data
    assert [r.id for r in page.rows] == [several.pk, question.pk, delegated.pk]
    assert pending_results(page.rows) == expected
    first = pending_results(page.rows)[0]
    assert (first["approvals_needed"], [a["by"] for a in first["approvals"]]) == (2, [LEA.ref])
    assert first["expires_at"] is not None and pending_results(page.rows)[2]["chain"] == [
        "desk",
        "billing",
    ]


@override_settings(APPROVALS=LEGAL_AND_FINANCE)
def test_a_role_holder_counts_and_pages_the_calls_several_roles_may_approve(turn):
    calls = [calls_of(turn(REFUND))[0].pk for _ in range(3)]
    lea = selectors.decidable_by(LEA)
    assert selectors.pending_count(LEA) == 3
    page = pending.page(selectors.pending_calls(), {"limit": 2}, PendingPagination(), branches=lea)
    following = {"limit": 2, "cursor": page.next_cursor}
    rest = pending.page(selectors.pending_calls(), following, PendingPagination(), branches=lea)
    assert [r.id for r in page.rows + rest.rows] == calls and rest.next_cursor is None
    assert selectors.pending_count(Actor(ref="user:x", roles=frozenset({"legalese"}))) == 0


def test_each_branch_of_the_inbox_names_the_status_once():
    """PostgreSQL multiplies ``status IN (both)`` by ``status = 'pending_approval'`` as if they
    were independent, misjudges a requester's branch at 2 rows and sorts all their pending calls
    instead of walking the index (bench/README.md); each branch must name the status once."""
    actor = Actor(ref=ALICE.ref, roles=frozenset({"legal"}))
    keys = PendingPagination().keys_queryset(
        selectors.all_calls(), {}, branches=selectors.pending_branches(actor)
    )
    branches = str(keys.query).split(" UNION ")
    assert len(branches) == 5
    assert [b.count('"agent_core_toolcall"."status"') for b in branches] == [1] * 5


def test_a_case_that_names_no_status_still_lists_only_waiting_calls(turn, decide):
    decided, waiting = (calls_of(turn(REFUND))[0] for _ in range(2))
    decide(port.approve, decided.pk, actor=ALICE)
    cases = [Q(tool_name="issue_refund"), Q(status="pending_input")]
    refunds = reduce(or_, map(pending.waiting, cases))
    page = pending.page(selectors.all_calls(), {}, PendingPagination(), branches=refunds)
    assert [r.id for r in page.rows] == [waiting.pk]
    assert pending.count(selectors.all_calls(), refunds) == 1
