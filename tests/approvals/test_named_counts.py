"""The inbox's counts and first page as named statements (``approvals.sql.DECIDABLE_COUNT``,
``SEEN_WAITING_COUNT``, ``DECIDABLE_KEYS``) count and read what the policy's ``decidable`` and
``agent_core.access`` compile to, for every reason a call waits on someone and a run is seen, in
every order; a policy with a ``decidable`` of its own is counted and read by its own query."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db.models import Q
from django.utils import timezone

from agent_core.access import in_visible_runs
from agent_core.actors import Actor
from agent_core.api.pagination import Page
from agent_core.models import ToolCall
from approvals import pending, selectors
from approvals import services as port
from approvals.api.filters import PendingPagination
from approvals.models import Escalation
from approvals.pending import PendingRow
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


@pytest.fixture
def every_reason(turn, decide, settings):
    """A call waiting for every reason there is, and one decided."""
    settings.APPROVALS = RULES
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
    # Deadlines for the deadline order: some soon, some later, some tied, the rest none.
    for i, call in enumerate(ToolCall.objects.filter(status__in=pending.WAITING).order_by("pk")):
        if i % 3:
            ToolCall.objects.filter(pk=call.pk).update(expires_at=now + timedelta(hours=i % 2))


def test_the_named_counts_are_the_compiled_ones_for_every_reason(every_reason):
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
    unfiltered = {"sort": "oldest"}
    settings.AGENT = {
        **settings.AGENT,
        "APPROVAL_POLICY": "tests.approvals.test_named_counts.AuditorsDecideRefunds",
    }
    auditor = Actor(ref="user:aud", roles=frozenset({"auditors"}))
    assert selectors.pending_count(auditor) == 1
    assert selectors.seen_waiting_count(auditor) == 1
    assert (selectors.pending_count(ALICE), selectors.seen_waiting_count(ALICE)) == (1, 1)
    assert selectors.first_page(auditor, unfiltered, PendingPagination()) is None  # compiled


def compiled_page(actor: Actor, params: dict[str, str]) -> Page[PendingRow]:
    """The page of what ``actor`` may decide as the ORM compiles it from the policy."""
    branches = selectors.pending_branches(actor)
    return pending.page(selectors.all_calls(), params, PendingPagination(), branches=branches)


def test_the_named_first_page_is_the_compiled_one_for_every_reason_and_order(every_reason):
    assert len(compiled_page(FRAN, {}).rows) == 3 and len(compiled_page(ALICE, {}).rows) == 2
    for actor in (ALICE, LEA, FRAN, OPS, MARK, BOB, OTTO, BOTH):
        for sort in PendingPagination.orderings:
            for limit in ("1", "2", "50"):
                params = {"sort": sort, "limit": limit}
                named = selectors.first_page(actor, params, PendingPagination())
                assert named == compiled_page(actor, params), (actor, params)
