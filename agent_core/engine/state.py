"""The allowed status transitions of Run and ToolCall (SPEC §4) and the one helper that writes one.

Every status write is a compare-and-set, ``UPDATE … WHERE status IN (<sources>)`` inside the
caller's transaction, through ``transition``. A pair that is not in the table raises
``InvalidTransition`` before anything is written (a bug, said loudly). A compare-and-set that
matched no row means one thing everywhere: another writer got there first, the row is unchanged,
and the helper says so by returning 0; the caller decides what losing means for it.

A status that only moves a row to the status it already has (a lease taken over: ``running``
stays ``running``) is not a transition. A call's first status is written by its ``INSERT``: the
loop proposes it (``proposed``) and ``check`` stamps where the proposal went.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db import connection
from django.db.models import Field, Model, QuerySet

from ..choices import CALL_TERMINAL, RUN_TERMINAL, CallStatus, RunStatus
from ..exceptions import InvalidTransition
from ..models import Run, ToolCall
from . import rows

_R, _C = RunStatus, CallStatus

RUN_ALLOWED: frozenset[tuple[str, str]] = frozenset(
    {
        (_R.QUEUED, _R.RUNNING),  # a driver took the lease
        (_R.RUNNING, _R.WAITING),  # parked on a person (or on a call in doubt)
        (_R.WAITING, _R.QUEUED),  # nothing blocks any more: queued for a driver, which runs it
        (_R.RUNNING, _R.COMPLETED),
        (_R.RUNNING, _R.CANCELLING),  # a driver holds it: stopped at its next safe point
        (_R.CANCELLING, _R.CANCELLED),
        # No driver holds it: cancelled at once.
        (_R.QUEUED, _R.CANCELLED),
        (_R.RUNNING, _R.CANCELLED),
        (_R.WAITING, _R.CANCELLED),
        # A step failed (running), or the run was settled as dead from outside its driver.
        (_R.QUEUED, _R.FAILED),
        (_R.RUNNING, _R.FAILED),
        (_R.WAITING, _R.FAILED),
    }
)

CALL_ALLOWED: frozenset[tuple[str, str]] = frozenset(
    {
        # Proposed: where the gate, the tool's kind or its preflight sends a new call.
        (_C.PROPOSED, _C.APPROVED),
        (_C.PROPOSED, _C.PENDING_APPROVAL),
        (_C.PROPOSED, _C.PENDING_INPUT),
        (_C.PROPOSED, _C.REFUSED),
        (_C.PROPOSED, _C.SUCCEEDED),
        (_C.PROPOSED, _C.FAILED),  # unknown tool, invalid arguments, over the step's limit
        # A person decides, the deadline passes, the run dies or is cancelled.
        (_C.PENDING_APPROVAL, _C.APPROVED),
        (_C.PENDING_APPROVAL, _C.REJECTED),
        (_C.PENDING_APPROVAL, _C.EXPIRED),
        (_C.PENDING_APPROVAL, _C.FAILED),
        (_C.PENDING_APPROVAL, _C.CANCELLED),
        (_C.PENDING_APPROVAL, _C.SUPERSEDED),  # a newer proposal of the same key (SPEC §17)
        (_C.PENDING_INPUT, _C.SUCCEEDED),  # answered
        (_C.PENDING_INPUT, _C.REJECTED),  # skipped
        (_C.PENDING_INPUT, _C.FAILED),
        (_C.PENDING_INPUT, _C.CANCELLED),
        # Approved: claimed; a read ran; the second preflight refused it or found it done.
        (_C.APPROVED, _C.EXECUTING),
        (_C.APPROVED, _C.SUCCEEDED),
        (_C.APPROVED, _C.FAILED),
        (_C.APPROVED, _C.REFUSED),
        (_C.APPROVED, _C.CANCELLED),  # the run was cancelled before it was dispatched
        (_C.EXECUTING, _C.SUCCEEDED),
        (_C.EXECUTING, _C.FAILED),
        (_C.EXECUTING, _C.IN_DOUBT),  # the attempt died mid-effect
        (_C.EXECUTING, _C.CANCELLED),  # a delegation whose run was cancelled (SPEC §14)
        # In doubt: recover() or a person says it happened (done) or not (runs again, asking
        # afresh when its tool's approval_scope is "attempt").
        (_C.IN_DOUBT, _C.SUCCEEDED),
        (_C.IN_DOUBT, _C.APPROVED),
        (_C.IN_DOUBT, _C.PENDING_APPROVAL),
    }
)

ALLOWED: dict[type[Model], frozenset[tuple[str, str]]] = {Run: RUN_ALLOWED, ToolCall: CALL_ALLOWED}

_TERMINAL: dict[type[Model], frozenset[str]] = {Run: RUN_TERMINAL, ToolCall: CALL_TERMINAL}


@dataclass(frozen=True)
class Writes:
    """Moves a named statement makes on rows of ``model``: from any of ``sources`` to any of
    ``targets`` (each pair one the table allows)."""

    model: type[Model]
    sources: frozenset[str]
    targets: frozenset[str]


# The named statements that write a status themselves (one round trip with the writes around
# them), by their text, with the moves each declares (``writes``); ``check_statement`` holds a
# caller to them, and ``tests/agent_core/test_state.py`` finds every statement of every module
# that writes a status here.
_DECLARED: dict[str, tuple[Writes, ...]] = {}


def writes(statement: str, *moves: Writes) -> str:
    """Declare the status moves ``statement`` makes (refused now, at import, if the table does not
    allow one of them); returns the statement."""
    for move in moves:
        for source in move.sources:
            for target in move.targets:
                check(move.model, source, target)
    _DECLARED[statement] = moves
    return statement


def declared(statement: str) -> tuple[Writes, ...] | None:
    """The moves ``statement`` declares (``None``: it writes no status)."""
    return _DECLARED.get(statement)


def declared_statements() -> list[str]:
    """Every statement declared to write a status."""
    return list(_DECLARED)


def check_statement(
    statement: str, model: type[Model], sources: str | Iterable[str], target: str
) -> list[str]:
    """``check``, for a move the caller is about to make by running ``statement``: also refused
    when the statement does not declare it."""
    found = check(model, sources, target)
    if not any(
        move.model is model and target in move.targets and move.sources.issuperset(found)
        for move in _DECLARED.get(statement, ())
    ):
        raise InvalidTransition(
            f"this statement does not move a {model.__name__} from {found} to {target}"
        )
    return found


_M = TypeVar("_M", Run, ToolCall)


def check(model: type[Model], sources: str | Iterable[str], target: str) -> list[str]:
    """The ``sources`` as a list, once every move from one of them to ``target`` is allowed."""
    found = [sources] if isinstance(sources, str) else list(sources)
    allowed = ALLOWED[model]
    for source in found:
        # Keeping its status is no move (a lease taken over), unless the status is terminal.
        kept = source == target and target not in _TERMINAL[model]
        if not kept and (source, target) not in allowed:
            raise InvalidTransition(f"{model.__name__} may not go from {source} to {target}")
    return found


def sources_of(model: type[Model], target: str) -> frozenset[str]:
    """Every status the table lets a row of ``model`` leave for ``target``."""
    return frozenset(source for source, to in ALLOWED[model] if to == target)


def transition(rows: QuerySet[_M], sources: str | Iterable[str], target: str, **fields: Any) -> int:
    """Move the ``rows`` still in one of ``sources`` to ``target`` (with ``fields``), as one
    compare-and-set; returns how many moved (0: the caller lost the race)."""
    found = check(rows.model, sources, target)
    return rows.filter(status__in=found).update(status=target, **fields)


@dataclass(frozen=True)
class Added:
    """A value ``transition_one`` adds to a column rather than writes (``attempts``)."""

    amount: int


def transition_one(
    model: type[_M], pk: str, sources: str | Iterable[str], target: str, **fields: Any
) -> int:
    """``transition`` of the one row ``pk``, with plain values (or ``Added``) for ``fields``: the
    same compare-and-set, its statement built once per set of fields rather than compiled by
    the ORM every time (the hot path's status writes)."""
    found = check(model, sources, target)
    names = ("status", *fields)
    params: list[Any] = [
        value.amount
        if isinstance(value, Added)
        else _field(model, name).get_db_prep_save(value, connection)
        for name, value in zip(names, [target, *fields.values()], strict=True)
    ]
    added: tuple[bool, ...] = tuple(isinstance(v, Added) for v in fields.values())
    return rows.execute(_update(model, names, (False, *added)), [*params, pk, found])


@functools.cache
def _update(model: type[Model], names: tuple[str, ...], added: tuple[bool, ...]) -> str:
    quote = connection.ops.quote_name
    columns = [quote(_column(model, name)) for name in names]
    sets = ", ".join(
        f"{column} = {column} + %s" if add else f"{column} = %s"
        for column, add in zip(columns, added, strict=True)
    )
    table = quote(model._meta.db_table)
    return f'UPDATE {table} SET {sets} WHERE "id" = %s AND "status" = ANY(%s)'


def _field(model: type[Model], name: str) -> Field[Any, Any]:
    field = model._meta.get_field(name)
    assert isinstance(field, Field) and field.concrete, name
    return field


def _column(model: type[Model], name: str) -> str:
    column = _field(model, name).column
    assert column is not None, name
    return column
