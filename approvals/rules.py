"""Declarative approval rules from ``settings.APPROVALS["RULES"]``: the common case, no code.

``RULES`` maps a tool name (or ``"*"`` for every action tool without its own entry) to one rule
or a list of rules; the first rule whose ``when`` holds for the call's args decides::

    APPROVALS = {
        "RULES": {
            "issue_refund": [
                {"when": {"amount__lte": 20}, "required": False},  # small refunds just run
                {"when": {"amount__gt": 100}, "approver": "finance", "ttl": 3600},
                {"approver": "requester", "ttl": 86400},
            ],
            "send_campaign": {"approver": "marketing"},
        },
    }

A rule's keys: ``when`` (conditions, all must hold; none: always), ``required`` (default True),
``approver`` (``"requester"``, a role name, or a list of role names; default ``"requester"``),
``ttl`` (seconds or a ``timedelta``; default none), ``quorum`` (distinct approvers needed;
default 1), ``requester_counts`` (whether the requester may be one of them; default False) and
``escalate`` (``{"to": role, "before": seconds, "may_decide": bool}``: tell ``role`` if the call
still waits ``before`` its deadline; needs a ``ttl``).
A condition is ``<arg>`` or ``<arg>__<op>`` with op one of ``eq ne gt gte lt lte in``; a missing
arg never matches. Numbers compare as decimals, so ``{"amount__gt": 100}`` also holds for the
string ``"150.00"`` a Decimal argument is stored as.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from .conf import approvals_settings, per_settings, to_timedelta
from .requirement import REQUESTER, Escalate, Requirement

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "eq": operator.eq,
    "ne": operator.ne,
    "gt": operator.gt,
    "gte": operator.ge,
    "lt": operator.lt,
    "lte": operator.le,
    "in": lambda value, options: value in options,
}
_RULE_KEYS = frozenset(
    {"when", "required", "approver", "ttl", "quorum", "requester_counts", "escalate"}
)
_ESCALATE_KEYS = frozenset({"to", "before", "may_decide"})
_MISSING = object()


@dataclass(frozen=True)
class Condition:
    """``arg <op> operand``, e.g. ``amount gt 100``."""

    arg: str
    op: str
    operand: Any

    def holds(self, args: dict[str, Any]) -> bool:
        value = args.get(self.arg, _MISSING)
        if value is _MISSING:
            return False
        if self.op == "in":
            return any(_compare(value, option, operator.eq) for option in self.operand)
        return _compare(value, self.operand, _OPS[self.op])


@dataclass(frozen=True)
class Rule:
    """Conditions on the args and the requirement that applies when they all hold."""

    when: tuple[Condition, ...]
    requirement: Requirement

    def matches(self, args: dict[str, Any]) -> bool:
        return all(c.holds(args) for c in self.when)


def _number(value: Any) -> Decimal | None:
    if isinstance(value, bool):
        return None
    try:
        return Decimal(str(value))
    except InvalidOperation:
        return None


def _compare(value: Any, operand: Any, op: Callable[[Any, Any], bool]) -> bool:
    if isinstance(operand, int | float | Decimal) and not isinstance(operand, bool):
        number = _number(value)
        return number is not None and op(number, Decimal(str(operand)))
    try:
        return op(value, operand)
    except TypeError:
        return False


def parse_rules(raw: dict[str, Any]) -> dict[str, tuple[Rule, ...]]:
    """Parse ``APPROVALS["RULES"]``; raises ``ImproperlyConfigured`` saying what is wrong."""
    if not isinstance(raw, dict):
        raise ImproperlyConfigured("APPROVALS['RULES'] must be a dict of tool name -> rules")
    return {tool: tuple(_rules(tool, spec)) for tool, spec in raw.items()}


def _rules(tool: str, spec: Any) -> list[Rule]:
    specs = spec if isinstance(spec, list | tuple) else [spec]
    return [_rule(f"APPROVALS['RULES'][{tool!r}][{i}]", s) for i, s in enumerate(specs)]


def _rule(where: str, spec: Any) -> Rule:
    if not isinstance(spec, dict):
        raise ImproperlyConfigured(f"{where} must be a dict, not {spec!r}")
    unknown = set(spec) - _RULE_KEYS
    if unknown:
        raise ImproperlyConfigured(f"{where} has unknown keys {sorted(unknown)}")
    required = spec.get("required", True)
    approver = spec.get("approver", REQUESTER)
    if not isinstance(required, bool):
        raise ImproperlyConfigured(f"{where}['required'] must be True or False")
    if isinstance(approver, list | tuple):
        approver = tuple(approver)
    if not isinstance(approver, str | tuple) or not approver:
        raise ImproperlyConfigured(
            f"{where}['approver'] must be 'requester', a role name or a list of role names"
        )
    requester_counts = spec.get("requester_counts", False)
    if not isinstance(requester_counts, bool):
        raise ImproperlyConfigured(f"{where}['requester_counts'] must be True or False")
    try:
        ttl = to_timedelta(spec.get("ttl"), key=f"{where}['ttl']")
    except ValueError as exc:
        raise ImproperlyConfigured(str(exc)) from exc
    escalate = _escalate(where, spec.get("escalate"))
    try:
        requirement = Requirement(
            required=required,
            approver=approver,
            ttl=ttl,
            quorum=spec.get("quorum", 1),
            requester_counts=requester_counts,
            escalate=escalate,
        )
    except ValueError as exc:
        raise ImproperlyConfigured(f"{where}: {exc}") from exc
    when = spec.get("when", {})
    if not isinstance(when, dict):
        raise ImproperlyConfigured(f"{where}['when'] must be a dict of conditions")
    return Rule(
        when=tuple(_condition(where, key, operand) for key, operand in when.items()),
        requirement=requirement,
    )


def _escalate(where: str, spec: Any) -> Escalate | None:
    if spec is None:
        return None
    if not isinstance(spec, dict) or set(spec) - _ESCALATE_KEYS or "to" not in spec:
        raise ImproperlyConfigured(
            f"{where}['escalate'] must be a dict of 'to' (a role), 'before' and 'may_decide'"
        )
    may_decide = spec.get("may_decide", False)
    if not isinstance(spec["to"], str) or not isinstance(may_decide, bool):
        raise ImproperlyConfigured(f"{where}['escalate']: 'to' is a role name, 'may_decide' a bool")
    try:
        before = to_timedelta(spec.get("before"), key=f"{where}['escalate']['before']")
    except ValueError as exc:
        raise ImproperlyConfigured(str(exc)) from exc
    if before is None:
        raise ImproperlyConfigured(f"{where}['escalate'] needs 'before' (seconds or a timedelta)")
    return Escalate(role=spec["to"], before=before, may_decide=may_decide)


def _condition(where: str, key: str, operand: Any) -> Condition:
    arg, _, op = key.partition("__")
    op = op or "eq"
    if op not in _OPS:
        raise ImproperlyConfigured(
            f"{where}['when'][{key!r}]: unknown operator {op!r} (use one of {sorted(_OPS)})"
        )
    if op == "in" and not isinstance(operand, list | tuple | set | frozenset):
        raise ImproperlyConfigured(f"{where}['when'][{key!r}] needs a list")
    return Condition(arg, op, operand)


@per_settings
def configured_rules() -> dict[str, tuple[Rule, ...]]:
    """The parsed rules of the current settings (cached until ``APPROVALS`` changes)."""
    return parse_rules(approvals_settings().RULES)


def rules_for(tool_name: str) -> tuple[Rule, ...]:
    """The configured rules of the tool (or of ``"*"``), in the order they are tried."""
    rules = configured_rules()
    return rules.get(tool_name, rules.get("*", ()))


def requirement_from_rules(tool_name: str, args: dict[str, Any]) -> Requirement | None:
    """The first matching rule's requirement for the tool (or ``"*"``); ``None`` when none does."""
    for rule in rules_for(tool_name):
        if rule.matches(args):
            return rule.requirement
    return None
