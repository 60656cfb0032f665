"""Who may decide a waiting call by default, as an ORM filter.

The same cases as the named statements of ``approvals.sql`` (``DECIDABLE_COUNT``,
``DECIDABLE_PAGES``, …) say in SQL, here as lookups that the ORM puts into whatever query it
builds on ``ToolCall`` (a page's branch, an ``exclude``, a subquery of
``agent_core.engine.access``). ``tests/approvals/test_named_counts.py`` checks that both say the
same for every reason a call waits on someone.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from operator import or_
from typing import Any

from django.db.models import CharField, Exists, Expression, OuterRef, Q, Subquery

from agent_core import approvers
from agent_core.actors import Actor
from agent_core.choices import CallStatus

from .models import Approval, Escalation
from .requirement import REQUESTER

_APPROVAL, _INPUT = CallStatus.PENDING_APPROVAL, CallStatus.PENDING_INPUT


class EscalatedTo(Expression):
    """The ids of the calls escalated to one of ``roles`` with the power to decide
    (``approvals.escalation``), as a subquery once a query resolves it. Equal for equal roles
    (an expression's identity is its arguments), so that a policy's ``decidable`` made of these
    compares equal to this module's (``selectors._default_rule``), and cheap to make until then:
    the named statements' requests only compare it."""

    output_field = CharField()

    def __init__(self, roles: Sequence[str]) -> None:
        super().__init__()
        self.roles = tuple(roles)

    def resolve_expression(
        self,
        query: Any = None,
        allow_joins: bool = True,
        reuse: set[str] | None = None,
        summarize: bool = False,
        for_save: bool = False,
    ) -> Any:  # the subquery, as ``F`` resolves to a column
        escalations = Escalation.objects.filter(
            escalated_at__isnull=False, may_decide=True, role__in=self.roles
        )
        subquery = Subquery(escalations.values("tool_call_id"))
        return subquery.resolve_expression(query, allow_joins, reuse, summarize, for_save)


def approved_by(actor: Actor) -> Q:
    """The calls ``actor`` already approved since they last started waiting (a quorum's first
    approval): they wait on others now, not on the actor (issue 42)."""
    given = Approval.objects.filter(
        tool_call=OuterRef("pk"), by_ref=actor.ref, at__gte=OuterRef("requested_at")
    )
    return Q(Exists(given))


def parameters(actor: Actor) -> dict[str, Any]:
    """The actor as the named statements take it: its ref, roles and roles pattern."""
    roles = sorted(actor.roles - {REQUESTER})
    return {"ref": actor.ref, "roles": roles, "pattern": approvers.one_of_pattern(roles)}


def decidable(actor: Actor) -> Q:
    """The waiting calls ``actor`` may decide: the cases it can meet, in the order of
    ``approvals.sql``'s (one ``OR`` branch each, which ``pending.page`` walks as an index each)."""
    ref, roles = actor.ref, parameters(actor)["roles"]
    # The approver is the requester, and the actor made the request.
    cases = [Q(status=_APPROVAL, approver=REQUESTER, requester_ref=ref)]
    # The approver is one of the actor's roles. A list, not an array: one role is an ``=``,
    # which PostgreSQL walks in index order for a page (an array it sorts).
    cases += [Q(status=_APPROVAL, approver__in=roles)] if roles else []
    # A question the actor asked is answered by the actor.
    cases += [Q(status=_INPUT, requester_ref=ref)]
    if roles:
        # Several roles may approve ("legal|marketing"), one of them the actor's; escalated to
        # one of its roles with the power to decide.
        cases += [Q(status=_APPROVAL) & approvers.one_of(roles)]
        cases += [Q(status=_APPROVAL, pk__in=EscalatedTo(roles))]
    return reduce(or_, cases)


def escalated(actor: Actor) -> Q:
    """The calls escalated to one of ``actor``'s roles with the power to decide, in any
    status."""
    roles = parameters(actor)["roles"]
    if not roles:
        return Q(pk__in=[])
    return Q(pk__in=EscalatedTo(roles))
