"""The inbox's counts as named statements (``approvals.sql.DECIDABLE_COUNT``,
``SEEN_WAITING_COUNT``) count what the policy's ``decidable`` and ``agent_core.access`` compile
to, for every reason a call waits on someone and a run is seen; a policy with a ``decidable`` of
its own is counted by its own query."""

from __future__ import annotations

import pytest
from django.db.models import Q
from django.test import override_settings
from django.utils import timezone

from agent_core.access import in_visible_runs
from agent_core.actors import Actor
from agent_core.models import ToolCall
from approvals import pending, selectors
from approvals import services as port
from approvals.models import Escalation
from approvals.policy import DefaultPolicy
from tests.approvals.test_pending import LEA
from tests.conftest import ALICE, REFUND, calls_of
from tests.test_visible_runs import BOB, FRAN, MARK, OPS, RULES

pytestmark = pytest.mark.django_db

OTTO = Actor(ref="user:otto", roles=frozenset({"operator"}))
BOTH = Actor(ref="user:both", roles=frozenset({"finance", "ops", "requester"}))


def reference(actor: Actor) -> tuple[int, int]:
    """The counts as the ORM compiles them from the policy and the visibility rule."""
    waiting = ToolCall.objects.filter(status__in=pending.WAITING)
    decidable = pending.count(selectors.all_calls(), selectors.pending_branches(actor))
    return decidable, in_visible_runs(actor, waiting).count()


@override_settings(APPROVALS=RULES)
def test_the_named_counts_are_the_compiled_ones_for_every_reason(turn, decide):
    decided = calls_of(turn(REFUND))[0]
    decide(port.approve, decided.pk, actor=LEA)
    decide(port.approve, decided.pk, actor=FRAN)  # the quorum of two: no longer pending
    half = calls_of(turn(REFUND))[0]
    decide(port.approve, half.pk, actor=LEA)  # one of two: still pending
    now = timezone.now()
    for role in ("ops", "finance"):  # to a role of its own, and to one that approves it anyway
        escalated = calls_of(turn(REFUND))[0]
        Escalation.objects.create(
            tool_call=escalated, role=role, may_decide=True, due_at=now, escalated_at=now
        )
    calls_of(turn('/call ask_user {"question": "Which order?"}'))
    calls_of(turn('/call purge_cache {"path": "/p"}'))  # marketing's alone
    calls_of(turn('/call issue_refund {"order_id": "A-1", "amount": 50}'))  # the requester's

    for actor in (ALICE, LEA, FRAN, OPS, MARK, BOB, OTTO, BOTH):
        named = selectors.pending_count(actor), selectors.seen_waiting_count(actor)
        assert named == reference(actor), actor
    assert reference(ALICE) == (2, 6) and reference(FRAN) == (3, 3)


class AuditorsDecideRefunds(DefaultPolicy):
    def decidable(self, actor: Actor) -> Q:
        auditor = "auditors" in actor.roles
        refunds = Q(status="pending_approval", tool_name="issue_refund")
        return super().decidable(actor) | (refunds if auditor else Q(pk__in=[]))


def test_a_policy_of_its_own_is_counted_by_its_own_query(turn, settings):
    calls_of(turn(REFUND))
    settings.AGENT = {
        **settings.AGENT,
        "APPROVAL_POLICY": "tests.approvals.test_named_counts.AuditorsDecideRefunds",
    }
    auditor = Actor(ref="user:aud", roles=frozenset({"auditors"}))
    assert selectors.pending_count(auditor) == 1
    assert selectors.seen_waiting_count(auditor) == 1
    assert (selectors.pending_count(ALICE), selectors.seen_waiting_count(ALICE)) == (1, 1)
