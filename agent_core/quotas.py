"""Per-actor quotas (SPEC §10 ``quota_exceeded``): runs per minute, concurrent runs, tokens a day.

``AGENT["QUOTAS"]`` sets the limits over all agents and, in ``PER_AGENT``, on one agent; the
policy at ``AGENT["QUOTA_POLICY"]`` (a dotted path, like the approval policy) applies them and may
add rules of its own. A start over a limit is refused (429 with ``Retry-After``); a run that
crosses its token budget stops at its next model step with ``quota_exceeded``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from django.db.models import Min, QuerySet
from django.utils import timezone
from django.utils.module_loading import import_string

from . import signals
from .actors import Actor
from .choices import RUN_ACTIVE, QueuedStatus, RunKind
from .conf import QuotaLimits, agent_settings
from .engine import rows, sql, usage
from .exceptions import QuotaExceeded
from .models import QueuedMessage, Run, Step

MINUTE, DAY = timedelta(minutes=1), timedelta(days=1)
CONCURRENT_RETRY_SECONDS = 5  # when a run will end is unknown: a short, honest guess


@dataclass(frozen=True)
class Exceeded:
    """A limit that refuses: which one, why, and when trying again may succeed (seconds)."""

    limit: str
    detail: str
    retry_after: int


class QuotaPolicy(Protocol):
    """Decides whether an actor may start a run, and whether a run may take its next model step."""

    def check_start(self, actor: Actor, agent: str, *, starts_now: bool) -> Exceeded | None: ...

    def check_step(self, run: Run) -> Exceeded | None: ...


def _seconds_until(moment: datetime | None) -> int:
    if moment is None:
        return 1
    return max(1, math.ceil((moment - timezone.now()).total_seconds()))


class SettingsQuotaPolicy:
    """The limits of ``AGENT["QUOTAS"]``; subclass it and extend a method for rules of your own."""

    def _scopes(self, agent: str) -> list[tuple[str | None, QuotaLimits]]:
        quotas = agent_settings().QUOTAS
        scopes: list[tuple[str | None, QuotaLimits]] = [(None, quotas)]
        if agent in quotas.PER_AGENT:
            scopes.append((agent, quotas.PER_AGENT[agent]))
        return scopes

    def check_start(self, actor: Actor, agent: str, *, starts_now: bool) -> Exceeded | None:
        """Runs per minute (the actor's queued messages count: each is a run to come) and tokens
        per day; concurrent runs when the run ``starts_now`` (a queued message adds no run
        until the active one ends)."""
        for scope, limits in self._scopes(agent):
            runs = Run.objects.filter(actor_ref=actor.ref, parent_run__isnull=True)
            queued = QueuedMessage.objects.filter(actor_ref=actor.ref, status=QueuedStatus.QUEUED)
            if scope is not None:
                runs = runs.filter(agent=scope)
                queued = queued.filter(agent=scope)
            found = (
                _runs_per_minute(runs, queued, limits.RUNS_PER_MINUTE, scope)
                or (_concurrent(runs, limits.CONCURRENT_RUNS, scope) if starts_now else None)
                or _tokens(actor.ref, limits.TOKENS_PER_DAY, scope)
            )
            if found:
                return found
        return None

    def check_step(self, run: Run) -> Exceeded | None:
        """The daily token budgets of the run's actor."""
        for scope, limits in self._scopes(run.agent):
            found = _tokens(run.actor_ref, limits.TOKENS_PER_DAY, scope)
            if found:
                return found
        return None


def _of(scope: str | None) -> str:
    return f" for agent {scope!r}" if scope else ""


def _runs_per_minute(
    runs: QuerySet[Run], queued: QuerySet[QueuedMessage], limit: int | None, scope: str | None
) -> Exceeded | None:
    if limit is None:
        return None
    recent = runs.filter(created_at__gte=timezone.now() - MINUTE)
    if recent.count() + queued.count() < limit:
        return None
    oldest = recent.aggregate(oldest=Min("created_at"))["oldest"]
    # Only queued messages: they leave the count as they start, when is unknown.
    retry = _seconds_until(oldest + MINUTE) if oldest else CONCURRENT_RETRY_SECONDS
    return Exceeded("runs_per_minute", f"at most {limit} runs a minute{_of(scope)}", retry)


def _concurrent(runs: QuerySet[Run], limit: int | None, scope: str | None) -> Exceeded | None:
    # A proposal waiting for its decision (SPEC §17) holds up no conversation: it is not counted.
    active = runs.filter(status__in=RUN_ACTIVE).exclude(kind=RunKind.PROPOSAL)
    if limit is None or active.count() < limit:
        return None
    detail = f"at most {limit} active runs at once{_of(scope)}"
    return Exceeded("concurrent_runs", detail, CONCURRENT_RETRY_SECONDS)


def _tokens(actor_ref: str, limit: int | None, scope: str | None) -> Exceeded | None:
    if limit is None:
        return None
    since = timezone.now() - DAY
    used = usage.of_actor(actor_ref, since=since, agent=scope).total
    if used < limit:
        return None
    steps = Step.objects.filter(run__actor_ref=actor_ref, finished_at__gte=since)
    if scope is not None:
        steps = steps.filter(run__agent=scope)
    oldest = steps.aggregate(oldest=Min("finished_at"))["oldest"]
    return Exceeded(
        "tokens_per_day",
        f"{used} of {limit} model tokens a day used{_of(scope)}",
        _seconds_until(oldest + DAY if oldest else None),
    )


def get_policy() -> QuotaPolicy:
    """The quota policy named by ``AGENT["QUOTA_POLICY"]``."""
    policy: QuotaPolicy = import_string(agent_settings().QUOTA_POLICY)()
    return policy


def check_start(actor: Actor, agent: str, *, starts_now: bool) -> None:
    """Refuse a start over a limit with ``QuotaExceeded``. Called inside the start's transaction:
    a per-actor lock held to its commit makes concurrent starts of one actor count each other."""
    policy = get_policy()
    rows.fetch_one(sql.ADVISORY_LOCK, {"name": f"airlock-quota:{actor.ref}"})
    found = policy.check_start(actor, agent, starts_now=starts_now)
    if found is not None:
        signals.quota_exceeded.send(Run, run=None, actor_ref=actor.ref, reason=found.limit)
        raise QuotaExceeded(found.detail, retry_after=found.retry_after)


def check_step(run: Run) -> Exceeded | None:
    """Whether the run's actor may spend more model tokens (checked before each model step)."""
    return get_policy().check_step(run)
