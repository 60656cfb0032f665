"""Who a call's ``approver`` (``ToolCall.approver``) names: the ``requester`` marker, one role, or
several roles any of which may approve, joined by ``ROLE_SEPARATOR`` ("legal|marketing").

How several roles are joined and matched is said here once: the ORM's filter
(``agent_core.engine.access``), the approvals app's named statements and its filter
(``approvals.sql``,
``approvals.cases``) and the partial indexes of those few calls (``ToolCall``'s) are built from it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from django.db.models import Q

ROLE_SEPARATOR = "|"


def one_of_pattern(roles: Sequence[str]) -> str | None:
    """A regular expression (PostgreSQL's ``~``) that an approver of several roles matches when
    one of them is in ``roles``; ``None`` for no roles."""
    if not roles:
        return None
    alternatives = "|".join(re.escape(role) for role in roles)
    sep = re.escape(ROLE_SEPARATOR)
    return f"(^|{sep})({alternatives})({sep}|$)"


def one_of(roles: Sequence[str]) -> Q:
    """The calls several roles may approve, one of them in ``roles`` (at least one). Its
    ``LIKE '%|%'`` is the predicate of the partial indexes of those few calls, so a query that
    names it may walk one of them."""
    return Q(approver__contains=ROLE_SEPARATOR, approver__regex=one_of_pattern(roles))


def one_of_sql(call: str, pattern: str) -> str:
    """``one_of`` in SQL, on the calls' table aliased ``call``, its pattern the parameter
    ``pattern`` (``one_of_pattern``'s)."""
    return f"{call}.approver LIKE '%%{ROLE_SEPARATOR}%%' AND {call}.approver ~ {pattern}"
