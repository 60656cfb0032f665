"""Read queries of the approvals app: what an actor may decide, and their remembered approvals."""

from __future__ import annotations

from functools import reduce
from operator import or_
from typing import Any

from django.db import connection
from django.db.models import Q, QuerySet

from agent_core.actors import Actor
from agent_core.api.pagination import KeysetPagination, Page
from agent_core.conf import agent_settings
from agent_core.engine.access import in_visible_runs, is_operator, visible_runs
from agent_core.exceptions import NotFound
from agent_core.gate import cases_of, get_gate
from agent_core.models import ToolCall

from . import cases, pending, sql
from .gate import ApprovalGate
from .models import DecisionAttempt, RememberedApproval
from .pending import PendingRow
from .policy import get_policy


def visible_attempts(actor: Actor) -> QuerySet[DecisionAttempt]:
    """The decision attempts ``actor`` may read: those on the runs it may see
    (``agent_core.engine.access.visible_runs``) and its own (a refused attempt may be on a run it
    may
    not see), but for its ``not_found`` ones (issue 35)."""
    attempts = DecisionAttempt.objects.all()
    if is_operator(actor):
        return attempts
    # Its own but for those on calls it may not see: their row names the call's tool and run.
    own = Q(actor_ref=actor.ref) & ~Q(outcome=NotFound.code)
    return attempts.filter(Q(run_id__in=visible_runs(actor).values("pk")) | own)


def pending_for(actor: Actor) -> QuerySet[ToolCall]:
    """Pending approvals and questions this actor may decide, oldest first, in one query.

    The filter is the configured policy's ``decidable(actor)``, the query mirror of its
    ``can_decide`` / ``can_answer``. A policy that overrides those without ``decidable`` gets the
    default filter here (system check ``approvals.W001``); the port still enforces its rule.
    """
    return pending_calls().filter(decidable_by(actor)).order_by("requested_at", "id")


def pending_count(actor: Actor) -> int:
    """``pending_for(actor).count()``: with the default policy and gate, one named statement
    (``sql.DECIDABLE_COUNT``); else compiled from the policy, a ``UNION`` of one index walk per
    case."""
    if _default_rule(actor):
        return _count(sql.DECIDABLE_COUNT, actor)
    return pending.count(all_calls(), pending_branches(actor))


def seen_waiting_count(actor: Actor) -> int:
    """How many calls wait on a person in the runs ``actor`` may see (``agent_core.engine.access``):
    with the default policy and gate, one named statement (``sql.SEEN_WAITING_COUNT``)."""
    if is_operator(actor):
        return _count(sql.WAITING_COUNT, actor)
    if _default_rule(actor):
        return _count(sql.SEEN_WAITING_COUNT, actor)
    return in_visible_runs(actor, ToolCall.objects.filter(status__in=pending.WAITING)).count()


def _default_rule(actor: Actor) -> bool:
    """Whether who may decide what for ``actor`` is the default cases (the rule the policy gives
    equals ``cases.decidable``: it is what the policy says, not which methods it overrides),
    which the named statements of ``sql`` say: then they read it, else the ORM compiles the
    rule. Both answer the same (``tests/approvals/test_named_counts.py`` runs its tests over a
    policy of each kind). The gate adds the escalations, which the named statements say too."""
    default = get_policy().decidable(actor) == cases.decidable(actor)
    return default and type(get_gate()) is ApprovalGate


def first_page(actor: Actor, params: Any, pagination: KeysetPagination) -> Page[PendingRow] | None:
    """The first page of ``pending_for(actor)`` ``params`` ask for (``sort``, ``limit``; no
    cursor, no filter), as ``pending.page`` reads it: with the default policy and gate, one named
    statement (``sql.DECIDABLE_PAGES``, by order); else ``None`` (the page is compiled)."""
    return _named_page(sql.DECIDABLE_PAGES, actor, params, pagination)


def seen_first_page(
    actor: Actor, params: Any, pagination: KeysetPagination
) -> Page[PendingRow] | None:
    """The first page (as ``first_page``) of the waiting calls ``actor`` may see
    (``agent_core.engine.access.in_visible_runs``) but not decide (``decidable_by``): the console's
    *Waiting on others*. With the default policy and gate, one named statement
    (``sql.SEEN_UNDECIDABLE_PAGES``, an operator's ``EVERY_UNDECIDABLE_PAGES``); else ``None``."""
    pages = sql.EVERY_UNDECIDABLE_PAGES if is_operator(actor) else sql.SEEN_UNDECIDABLE_PAGES
    return _named_page(pages, actor, params, pagination)


def _named_page(
    pages: dict[str, str], actor: Actor, params: Any, pagination: KeysetPagination
) -> Page[PendingRow] | None:
    if params.get(pagination.cursor_query_param) or not _default_rule(actor):
        return None
    sort, limit = pagination.sort_of(params), pagination.limit_of(params)
    found = pending.first_rows(pages[sort], limit + 1, cases.parameters(actor))
    return pagination.page_of(found, sort, limit)


def _count(statement: str, actor: Actor) -> int:
    with connection.cursor() as cursor:
        cursor.execute(statement, cases.parameters(actor))
        return int(cursor.fetchone()[0])


def pending_calls() -> QuerySet[ToolCall]:
    """Every call waiting on a person (approval or answer), with its run and thread."""
    return all_calls().filter(status__in=pending.WAITING)


def all_calls() -> QuerySet[ToolCall]:
    """Every call, with its run and thread: the base of ``pending_branches``' pages."""
    return ToolCall.objects.select_related("run", "thread")


def pending_branches(actor: Actor) -> Q:
    """``decidable_by(actor)`` on ``all_calls()``: each case restricted to waiting calls once
    (``pending.waiting``), for the inbox's pages and counts."""
    return reduce(or_, map(pending.waiting, cases_of(decidable_by(actor))))


def decidable_by(actor: Actor) -> Q:
    """The configured policy's ``decidable(actor)``, each case less the calls the actor already
    approved (a quorum's first approval: they wait on others now): what waits on the actor."""
    mine = cases.approved_by(actor)
    return reduce(or_, (case & ~mine for case in cases_of(get_policy().decidable(actor))))


def remembered_for(actor: Actor, *, include_inactive: bool = False) -> QuerySet[RememberedApproval]:
    """Remembered approvals the actor may see: on their threads, or granted by them; every one
    for an operator (``AGENT["OPERATOR_ROLE"]``)."""
    grants = (
        RememberedApproval.objects.all()
        if include_inactive
        else RememberedApproval.objects.active()
    )
    if not actor.has_role(agent_settings().OPERATOR_ROLE):
        grants = grants.filter(Q(thread__owner_ref=actor.ref) | Q(granted_by_ref=actor.ref))
    return (
        grants.select_related("thread").prefetch_related("covered").order_by("-created_at", "-id")
    )
