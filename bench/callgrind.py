"""What the instruction benchmarks read from callgrind's output (``cycle_instructions.py``,
``postgres_instructions.py``)."""

from __future__ import annotations

from pathlib import Path


def totals(out: Path) -> int | None:
    """The instructions a callgrind output file counts in all (``None``: not written yet).
    callgrind ends a profile with ``totals:``, or ``summary:`` in older releases."""
    for line in out.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    return None
