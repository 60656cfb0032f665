"""The approval-cycle benchmark's results: the figures of a runner's cycles, the Markdown table
of bench/README.md, and the single cycle beside issue 18's targets."""

from __future__ import annotations

import statistics
from dataclasses import dataclass


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


@dataclass
class Result:
    name: str
    to_waiting: list[float]
    to_completed: list[float]
    floor: float
    rate1: float = 0.0
    rate8: float = 0.0
    commits: float = 0.0
    rows: float = 0.0
    bytes: float = 0.0
    writes: float | None = None  # transactions that wrote (each costs a WAL flush at commit)
    # Counted in this process, so only for the inline runner.
    statements: float | None = None
    # Durable only: the same cycle's five step tasks sent through the broker doing nothing.
    empty: float | None = None
    # Inline only: the cycle's round trips with trivial statements (``bench.statement_floor``).
    statement_floor: float | None = None
    round_trips: int | None = None  # its statements, and each transaction's BEGIN and COMMIT


def report(results: list[Result]) -> str:
    lines = [
        "| runner | floor p50 (ms) | start→waiting p50 / p95 (ms) "
        "| approve→completed p50 / p95 (ms) | cycle p50 (ms) | x floor | cycles/s (1) "
        "| cycles/s (8) | commits / cycle | rows / cycle | "
        "bytes / cycle | SQL statements / cycle | write transactions / cycle "
        "| 5 empty tasks (ms) | x floor | round trips / cycle | statement floor p50 (ms) "
        "| x statement floor |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        total = [w + d for w, d in zip(r.to_waiting, r.to_completed, strict=True)]
        by_statements = None if r.statement_floor is None else _cycle(r) / r.statement_floor
        lines.append(
            f"| {r.name} | {ms(r.floor)} "
            f"| {ms(statistics.median(r.to_waiting))} / {ms(pct(r.to_waiting, 0.95))} "
            f"| {ms(statistics.median(r.to_completed))} / {ms(pct(r.to_completed, 0.95))} "
            f"| {ms(statistics.median(total))} | {statistics.median(total) / r.floor:.1f} "
            f"| {r.rate1:.1f} | {r.rate8:.1f} | {r.commits:.1f} | {r.rows:.0f} | {r.bytes:.0f} "
            f"| {_opt(r.statements)} | {_opt(r.writes)} "
            f"| {_ms_opt(r.empty)} | {_opt(None if r.empty is None else r.empty / r.floor)} "
            f"| {_opt(r.round_trips)} | {_ms_opt(r.statement_floor)} | {_opt(by_statements)} |"
        )
    return "\n".join(lines)


# Issue 18's targets for the single cycle: (what, runner, limit, higher is better).
TARGETS = [
    ("cycle / floor", "inline", 6.0, False),
    ("cycle / floor", "durable", 8.0, False),
    ("write transactions / cycle", "inline", 10.0, False),
    ("write transactions / cycle", "durable", 10.0, False),
    ("bytes / cycle", "inline", 10_000.0, False),
    ("bytes / cycle", "durable", 10_000.0, False),
    ("cycles/s, 8 in flight", "inline", 150.0, True),
    ("cycles/s, 8 in flight", "durable", 150.0, True),
]


def _cycle(r: Result) -> float:
    """The cycle's median (seconds)."""
    return statistics.median(w + d for w, d in zip(r.to_waiting, r.to_completed, strict=True))


def measured(r: Result, what: str) -> float | None:
    """One of a result's figures, by the name ``TARGETS`` gives it."""
    return {
        "cycle / floor": _cycle(r) / r.floor,
        "write transactions / cycle": r.writes,
        "bytes / cycle": r.bytes,
        "cycles/s, 8 in flight": r.rate8,
    }[what]


def against_targets(results: list[Result]) -> str:
    """The single cycle's figures beside issue 18's targets: met or not."""
    by_name = {r.name: r for r in results}
    lines = ["| target | runner | measured | limit | met |", "|---|---|---|---|---|"]
    for what, runner, limit, higher in TARGETS:
        if runner not in by_name:
            continue
        value = measured(by_name[runner], what)
        if value is None:
            verdict = "n/a"
        else:
            verdict = "met" if (value >= limit if higher else value <= limit) else "**not met**"
        sign = "≥" if higher else "≤"
        lines.append(f"| {what} | {runner} | {_opt(value)} | {sign} {limit:g} | {verdict} |")
    return "\n".join(lines)


def _opt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def _ms_opt(seconds: float | None) -> str:
    return "n/a" if seconds is None else ms(seconds)
