"""Model token usage: recorded per step in the journal, summed per run, thread and actor."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import F, QuerySet, Sum

from ..models import Run, Step

FIELDS = ("input_tokens", "output_tokens", "cached_tokens")


@dataclass(frozen=True)
class Totals:
    """Summed token usage."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0

    @property
    def total(self) -> int:
        """The tokens a budget counts: input and output (cached input is part of the input)."""
        return self.input_tokens + self.output_tokens

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in FIELDS}


def _summed(rows: QuerySet[Any]) -> Totals:
    sums = rows.aggregate(**{name: Sum(name) for name in FIELDS})
    return Totals(**{name: int(sums[name] or 0) for name in FIELDS})


def of_run(run: Run) -> Totals:
    """A run's usage (its totals, kept as its steps are recorded)."""
    return Totals(**{name: getattr(run, name) for name in FIELDS})


def of_thread(thread_id: str) -> Totals:
    """Every run of a thread."""
    return _summed(Run.objects.filter(thread_id=thread_id))


def of_actor(actor_ref: str, *, since: datetime, agent: str | None = None) -> Totals:
    """The model steps recorded since ``since`` for runs the actor started (of one ``agent``)."""
    steps = Step.objects.filter(run__actor_ref=actor_ref, finished_at__gte=since)
    if agent is not None:
        steps = steps.filter(run__agent=agent)
    return _summed(steps)


def by_actor_and_agent(*, since: datetime) -> list[dict[str, Any]]:
    """Usage since ``since`` per actor and agent, largest first (the console's metrics)."""
    rows = (
        Step.objects.filter(finished_at__gte=since, name__startswith="llm:")
        .values(actor_ref=F("run__actor_ref"), agent=F("run__agent"))
        .annotate(**{name: Sum(name) for name in FIELDS})
        .order_by("-output_tokens", "actor_ref", "agent")
    )
    return [dict(row) for row in rows]
