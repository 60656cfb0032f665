"""The inbox's counts and first pages as named statements (``approvals.sql.DECIDABLE_COUNT``,
``SEEN_WAITING_COUNT``, ``DECIDABLE_PAGES``, ``SEEN_UNDECIDABLE_PAGES``) count and read what the
policy's ``decidable`` and ``agent_core.engine.access`` compile to, for every reason a call waits on
someone and a run is seen, in every order, and what the policy's ``can_decide`` / ``can_answer``
say call by call; the REST inbox's first page and the console's *Waiting on others* one are the
named ones; a policy with a ``decidable`` of its own is counted and read by its own query."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import F, Q
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from agent_core.actors import Actor
from agent_core.api.pagination import Page
from agent_core.choices import CallStatus
from agent_core.engine.access import in_visible_runs
from agent_core.models import Thread, ToolCall
from approvals import pending, selectors, sql
from approvals import services as port
from approvals.api.filters import PendingPagination
from approvals.api.serializers import pending_results
from approvals.models import Approval, Escalation
from approvals.pending import PendingRow
from approvals.policy import DefaultPolicy, get_policy
from tests.approvals.test_pending import LEA
from tests.conftest import ALICE, REFUND, calls_of
from tests.test_visible_runs import BOB, FRAN, MARK, OPS, RULES

pytestmark = pytest.mark.django_db

OTTO = Actor(ref="user:otto", roles=frozenset({"operator"}))
BOTH = Actor(ref="user:both", roles=frozenset({"finance", "ops", "requester"}))
VIEWERS = (ALICE, LEA, FRAN, OPS, MARK, BOB, OTTO, BOTH)


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
    for actor in VIEWERS:
        named = selectors.pending_count(actor), selectors.seen_waiting_count(actor)
        assert named == reference(actor), actor
    assert reference(ALICE) == (2, 6) and reference(FRAN) == (3, 3)


class AuditorsDecideRefunds(DefaultPolicy):
    """A rule of its own, said in SQL: auditors decide refunds too."""

    def can_decide(self, actor: Actor, call: ToolCall) -> bool:
        auditor = "auditors" in actor.roles and call.tool_name == "issue_refund"
        return auditor or super().can_decide(actor, call)

    def decidable(self, actor: Actor) -> Q:
        auditor = "auditors" in actor.roles
        refunds = Q(status="pending_approval", tool_name="issue_refund")
        return super().decidable(actor) | (refunds if auditor else Q(pk__in=[]))


class AuditorsDecideRefundsInPython(AuditorsDecideRefunds):
    """The same rule as one SQL cannot say: asked of each call (the documented path)."""

    def decidable(self, actor: Actor) -> Q:
        return self.checked_one_by_one(actor)


AUDITOR = Actor(ref="user:aud", roles=frozenset({"auditors"}))
HERE = "tests.approvals.test_named_counts"


@pytest.fixture(
    params=[
        "approvals.policy.DefaultPolicy",  # the cases, read by the named statements
        f"{HERE}.AuditorsDecideRefunds",  # a rule in SQL, compiled by the ORM
        f"{HERE}.AuditorsDecideRefundsInPython",  # a rule SQL cannot say, asked call by call
    ]
)
def policy(request, settings):
    settings.AGENT = {**settings.AGENT, "APPROVAL_POLICY": request.param}
    return request.param


def test_every_list_is_what_the_policy_says_call_by_call(every_reason, header_actor, policy):
    """The one rule of who may decide, whatever the policy: the REST inbox, the counts the
    console shows, and what the actor may see are the calls the port lets it decide."""
    rule, waiting = get_policy(), list(ToolCall.objects.filter(status__in=pending.WAITING))
    for actor in (*VIEWERS, AUDITOR):
        # A quorum's call the actor already approved waits on the others, not on it (issue 42).
        given = set(
            Approval.objects.filter(
                by_ref=actor.ref, at__gte=F("tool_call__requested_at")
            ).values_list("tool_call_id", flat=True)
        )
        may = {
            call.pk
            for call in waiting
            if (rule.can_answer if call.status == CallStatus.PENDING_INPUT else rule.can_decide)(
                actor, call
            )
            and call.pk not in given
        }
        listed = {row["tool_call_id"] for row in api_get(actor, {"limit": "200"})["results"]}
        assert listed == may, (policy, actor)
        assert selectors.pending_count(actor) == len(may), (policy, actor)
        seen = in_visible_runs(actor, ToolCall.objects.filter(pk__in=may))
        assert seen.count() == len(may), (policy, actor)  # whoever may decide a call sees it
        assert selectors.seen_waiting_count(actor) == reference(actor)[1], (policy, actor)
    refunds = [c for c in waiting if c.tool_name == "issue_refund" and c.kind != "human"]
    auditor_may = policy != "approvals.policy.DefaultPolicy"
    assert selectors.pending_count(AUDITOR) == (len(refunds) if auditor_may else 0)


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


def viewers_and_pages() -> Iterator[tuple[Actor, dict[str, str]]]:
    """Every viewer with every order and a page of 1, 2 and 50 rows."""
    for actor in VIEWERS:
        for sort in PendingPagination.orderings:
            for limit in ("1", "2", "50"):
                yield actor, {"sort": sort, "limit": limit}


def compiled_page(actor: Actor, params: dict[str, str]) -> Page[PendingRow]:
    """The page of what ``actor`` may decide as the ORM compiles it from the policy."""
    branches = selectors.pending_branches(actor)
    return pending.page(selectors.all_calls(), params, PendingPagination(), branches=branches)


def test_there_is_a_named_first_page_for_every_order():
    for pages in (sql.DECIDABLE_PAGES, sql.SEEN_UNDECIDABLE_PAGES, sql.EVERY_UNDECIDABLE_PAGES):
        assert set(pages) == set(PendingPagination.orderings)


def test_the_named_first_page_is_the_compiled_one_for_every_reason_and_order(every_reason):
    assert len(compiled_page(FRAN, {}).rows) == 3 and len(compiled_page(ALICE, {}).rows) == 2
    for actor, params in viewers_and_pages():
        named = selectors.first_page(actor, params, PendingPagination())
        assert named == compiled_page(actor, params), (actor, params)


def test_the_cases_are_what_the_policy_says_call_by_call(every_reason):
    """The cases (``approvals.cases`` and the named statements of ``approvals.sql``) against the
    policy's own rule for one call: a case missing from them fails here, whichever path it is
    missing from."""
    policy, waiting = get_policy(), list(ToolCall.objects.filter(status__in=pending.WAITING))
    for actor in VIEWERS:
        may = {
            call.pk
            for call in waiting
            if (
                policy.can_answer if call.status == CallStatus.PENDING_INPUT else policy.can_decide
            )(actor, call)
            # less a quorum's approval it already gave: that waits on others (issue 42)
            and not Approval.objects.filter(tool_call=call, by_ref=actor.ref).exists()
        }
        page = selectors.first_page(actor, {"limit": "200"}, PendingPagination())
        assert page is not None and {row.id for row in page.rows} == may, actor
        assert selectors.pending_count(actor) == len(may), actor


PENDING = "/agent/approvals/pending"


def api_get(actor: Actor, params: dict[str, str]) -> dict:
    """The REST inbox as ``actor`` sees it (the header resolver stands in for a sign-in)."""
    roles = ",".join(sorted(actor.roles))
    response = APIClient().get(PENDING, params, HTTP_X_ACTOR_ID=actor.ref, HTTP_X_ACTOR_ROLE=roles)
    assert response.status_code == 200, response.content
    return response.json()


@pytest.fixture
def header_actor(settings):
    resolver = {"ACTOR_RESOLVER": "agent_core.actors.HeaderResolver", "ALLOW_HEADER_ACTOR": True}
    settings.AGENT = {**settings.AGENT, **resolver}


def test_the_rest_first_page_is_the_compiled_one(every_reason, header_actor):
    for actor, params in viewers_and_pages():
        compiled = compiled_page(actor, params)
        data = api_get(actor, params)
        assert data["results"] == pending_results(compiled.rows), (actor, params)
        assert data["next_cursor"] == compiled.next_cursor, (actor, params)


def named_reads(params: dict[str, str]) -> int:
    """How many statements FRAN's REST inbox with ``params`` ran that were its named first page
    (``DECIDABLE_PAGES``), not compiled by the ORM."""
    named = sql.DECIDABLE_PAGES[params.get("sort", "oldest")].split("%")[0]
    with CaptureQueriesContext(connection) as queries:
        api_get(FRAN, params)
    return sum(q["sql"].startswith(named) for q in queries.captured_queries)


def test_the_rest_first_page_is_read_by_the_named_statement(every_reason, header_actor):
    assert named_reads({}) == 1 and named_reads({"sort": "deadline", "limit": "2"}) == 1
    cursor = api_get(FRAN, {"limit": "1"})["next_cursor"]
    assert named_reads({"limit": "1", "cursor": cursor}) == 0  # a cursor: compiled
    assert named_reads({"tool": "issue_refund"}) == 0  # a filter: compiled
    assert named_reads({"q": "refund"}) == 0


def compiled_seen_page(actor: Actor, params: dict[str, str]) -> Page[PendingRow]:
    """The page of what ``actor`` may see but not decide as the ORM compiles it from the policy
    and the visibility rule (the console's *Waiting on others*)."""
    calls = in_visible_runs(actor, selectors.pending_calls().exclude(selectors.decidable_by(actor)))
    return pending.page(calls, params, PendingPagination())


@pytest.fixture
def shared_runs(every_reason, turn):
    """Runs holding a call marketing approves and one other, in a thread nobody here owns: each
    reason to see the run alone shows the other call to someone who may not decide it."""
    now = timezone.now()
    purge = '\n/call purge_cache {"path": "/shared"}'
    for first in (
        '/call issue_refund {"order_id": "A-2", "amount": 50}',  # the requester's
        '/call ask_user {"question": "Which one?"}',  # the requester's to answer
        REFUND,  # finance or legal
        REFUND + "#escalated",
    ):
        run = turn(first.removesuffix("#escalated") + purge)
        assert len(calls_of(run)) == 2, first
        Thread.objects.filter(pk=run.thread_id).update(owner_ref="user:nobody")
        if first.endswith("#escalated"):
            Escalation.objects.create(
                tool_call=calls_of(run)[0],
                role="ops",
                may_decide=True,
                due_at=now,
                escalated_at=now,
            )


def test_the_named_seen_first_page_is_the_compiled_one_for_every_reason_and_order(shared_runs):
    # alice owns the other threads: what she may not decide is all but her questions and refunds.
    assert len(compiled_seen_page(ALICE, {}).rows) == 6
    assert len(compiled_seen_page(OTTO, {}).rows) == 14
    for actor, params in viewers_and_pages():
        named = selectors.seen_first_page(actor, params, PendingPagination())
        assert named == compiled_seen_page(actor, params), (actor, params)


def test_a_policy_of_its_own_gets_a_compiled_seen_page(turn, settings):
    settings.AGENT = {
        **settings.AGENT,
        "APPROVAL_POLICY": "tests.approvals.test_named_counts.AuditorsDecideRefunds",
    }
    assert selectors.seen_first_page(ALICE, {}, PendingPagination()) is None


def named_seen_reads(client, params: dict[str, str]) -> int:
    """How many statements the console's *Waiting on others* with ``params`` ran that were its
    named first page (``SEEN_UNDECIDABLE_PAGES`` or an operator's ``EVERY_UNDECIDABLE_PAGES``),
    not compiled by the ORM."""
    named = sql.SEEN_UNDECIDABLE_PAGES[params.get("sort", "oldest")].split("%")[0]
    assert sql.EVERY_UNDECIDABLE_PAGES[params.get("sort", "oldest")].startswith(named)
    with CaptureQueriesContext(connection) as queries:
        response = client.get(reverse("console:inbox"), {"show": "others", **params})
    assert response.status_code == 200
    return sum(q["sql"].startswith(named) for q in queries.captured_queries)


def test_the_console_others_first_page_is_read_by_the_named_statement(every_reason, client, people):
    client.force_login(people["fran"])
    assert named_seen_reads(client, {}) == 1
    client.force_login(people["otto"])  # an operator sees every run
    assert named_seen_reads(client, {}) == 1
    assert named_seen_reads(client, {"sort": "deadline", "limit": "2"}) == 1
    cursor = compiled_seen_page(OTTO, {"limit": "1"}).next_cursor
    assert cursor is not None
    assert named_seen_reads(client, {"limit": "1", "cursor": cursor}) == 0  # a cursor: compiled
    assert named_seen_reads(client, {"tool": "issue_refund"}) == 0  # a filter: compiled
    assert named_seen_reads(client, {"q": "refund"}) == 0


def test_newest_first_walks_the_time_indexes_backwards():
    """A field that cannot be null is ordered without ``NULLS LAST`` (the same order), named or
    compiled: newest first is then the order of a ``requested_at`` index walked backwards, not a
    sort of every call of a branch; a deadline (nullable) keeps its nulls last."""
    pagination = PendingPagination()
    newest = sql.DECIDABLE_PAGES["newest"]
    assert "requested_at DESC, id DESC LIMIT" in newest and "NULLS" not in newest
    assert "expires_at ASC NULLS LAST, id ASC LIMIT" in sql.DECIDABLE_PAGES["deadline"]
    branches = selectors.pending_branches(FRAN)
    for sort, nulls in (("newest", False), ("oldest", False), ("deadline", True)):
        keys = pagination.keys_queryset(selectors.all_calls(), {"sort": sort}, branches=branches)
        assert ("NULLS LAST" in str(keys.query)) is nulls, sort
