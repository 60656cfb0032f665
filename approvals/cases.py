"""Who may decide a waiting call by default, as an ORM filter built from ``sql.DECIDABLE``.

The cases are written once, in SQL (``approvals.sql``): the named counts and first page use
them as they are, and the filter here puts each case's condition into whatever query the ORM
builds on ``ToolCall`` (a page's branch, an ``exclude``, a subquery of
``agent_core.engine.access``),
with ``{c}`` the alias that query gives the calls' table and the actor's values as parameters.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import reduce
from operator import or_
from typing import Any

from django.db.models import BooleanField, Expression, F, Q

from agent_core import approvers
from agent_core.actors import Actor

from . import sql
from .requirement import REQUESTER

_NAMED = re.compile(r"%\((\w+)\)s")


class Condition(Expression):
    """A condition on the call's columns in SQL (``{c}.column``, ``{in_roles}``, named parameters)
    as a filter."""

    output_field = BooleanField()

    def __init__(self, condition: str, values: Mapping[str, Any]) -> None:
        super().__init__()
        self.condition, self.values = condition, values
        self.call: Any = F("pk")  # resolved, its alias is the one the query gives the calls

    def get_source_expressions(self) -> list[Any]:
        return [self.call]

    def set_source_expressions(self, exprs: Sequence[Any]) -> None:
        (self.call,) = exprs

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, tuple[Any, ...]]:
        # The roles as a list, as Django's ``__in`` gives them: one role is an ``=``, which
        # PostgreSQL walks in index order for a page (an array, ``= ANY``, it sorts: the named
        # statements' price for one plan whatever the roles).
        roles = {f"role_{i}": role for i, role in enumerate(self.values["roles"])}
        in_roles = "IN ({})".format(", ".join(f"%({name})s" for name in roles))
        values = {**self.values, **roles}
        params: list[Any] = []

        def positional(name: re.Match[str]) -> str:
            params.append(values[name[1]])
            return "%s"

        table = compiler.quote_name_unless_alias(self.call.alias)
        sql = self.condition.format(c=table, in_roles=in_roles)
        return f"({_NAMED.sub(positional, sql)})", tuple(params)


def approved_by(actor: Actor) -> Q:
    """The calls ``actor`` already approved since they last started waiting
    (``sql.APPROVED_BY_ACTOR``): a quorum's first approval."""
    return Q(Condition(sql.APPROVED_BY_ACTOR, parameters(actor)))


def parameters(actor: Actor) -> dict[str, Any]:
    """The actor as the cases take it: its ref, roles and roles pattern."""
    roles = sorted(actor.roles - {REQUESTER})
    return {"ref": actor.ref, "roles": roles, "pattern": approvers.one_of_pattern(roles)}


def decidable(actor: Actor) -> Q:
    """The waiting calls ``actor`` may decide: the cases of ``sql.DECIDABLE`` it can meet (one
    ``OR`` branch each, which ``pending.page`` walks as an index each)."""
    values = parameters(actor)
    met = [case for case in sql.DECIDABLE if values["roles"] or not case.of_roles]
    return reduce(or_, (Q(Condition(case.condition, values), status=case.status) for case in met))


def escalated(actor: Actor) -> Q:
    """The calls escalated to one of ``actor``'s roles with the power to decide, in any status
    (``sql.ESCALATED``'s condition)."""
    values = parameters(actor)
    if not values["roles"]:
        return Q(pk__in=[])
    return Q(Condition(sql.ESCALATED.condition, values))
