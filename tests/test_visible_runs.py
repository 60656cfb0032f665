"""``access.in_visible_runs`` (the console's *Waiting on others*) gathers the runs an actor may
see, one index walk per reason, and finds the calls by run: the same calls as ``visible_calls``
for every reason a run is seen (its owner; a role that approves a call of the run, pending or
decided, alone or as one of several; an escalation to a role; none of these)."""

from __future__ import annotations

import pytest
from django.test import override_settings
from django.utils import timezone

from agent_core.actors import Actor
from agent_core.choices import CallStatus
from agent_core.engine import access
from agent_core.models import ToolCall
from approvals import services as port
from approvals.models import Escalation
from tests.approvals.test_pending import LEA, LEGAL_AND_FINANCE
from tests.conftest import ALICE, REFUND, calls_of

pytestmark = pytest.mark.django_db

FRAN = Actor(ref="user:fran", roles=frozenset({"finance"}))
OPS = Actor(ref="user:ops", roles=frozenset({"ops"}))
MARK = Actor(ref="user:mark", roles=frozenset({"marketing"}))
BOB = Actor(ref="user:bob", roles=frozenset())


RULES = {"RULES": {**LEGAL_AND_FINANCE["RULES"], "purge_cache": {"approver": "marketing"}}}


@override_settings(APPROVALS=RULES)
def test_runs_are_seen_for_every_reason_as_visible_calls_sees_them(turn, decide):
    decided = calls_of(turn(REFUND))[0]
    decide(port.approve, decided.pk, actor=LEA)
    decide(port.approve, decided.pk, actor=FRAN)  # the quorum of two: no longer pending
    escalated = calls_of(turn(REFUND))[0]
    now = timezone.now()
    Escalation.objects.create(
        tool_call=escalated, role="ops", may_decide=True, due_at=now, escalated_at=now
    )
    question = calls_of(turn('/call ask_user {"question": "Which order?"}'))[0]
    purge = calls_of(turn('/call purge_cache {"path": "/p"}'))[0]  # marketing's alone
    decided.refresh_from_db()
    assert decided.status != CallStatus.PENDING_APPROVAL and "|" in decided.approver

    expected = {
        ALICE: {decided.run_id, escalated.run_id, question.run_id, purge.run_id},  # the owner
        LEA: {decided.run_id, escalated.run_id},  # one of several roles, decided or not
        FRAN: {decided.run_id, escalated.run_id},
        OPS: {escalated.run_id},  # escalated to its role
        MARK: {purge.run_id},
        BOB: set(),
    }
    every = ToolCall.objects.all()
    for actor, runs in expected.items():
        seen = access.in_visible_runs(actor, every)
        assert set(seen.values_list("pk", flat=True)) == set(
            access.visible_calls(actor).values_list("pk", flat=True)
        ), actor
        assert set(seen.values_list("run_id", flat=True)) == runs, actor
