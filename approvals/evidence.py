"""Evidence of a decision (SPEC §19): what the decider was shown, under which policy, what was
approved, and a hash chain over every attempt that names the first row changed since.

- ``CallCard`` is what a decider is shown of a call. The console's card and the API's pending
  rows both render from it, and ``card_digest`` hashes it, so the digest cannot drift from
  what is rendered: a field added to the card is shown and hashed, or neither.
- ``policy_digest``: the configured policy's class and ``APPROVALS["RULES"]``.
- The chain: the table's trigger (migration 0011) stamps each row with ``seq``, the previous
  row's digest and ``sha256(prev_digest || content)``; ``content`` here computes the same text
  from a row, so ``verify`` recomputes every link.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from agent_core.models import ToolCall

from .conf import approvals_settings
from .models import DecisionAttempt
from .policy import policy_path

GENESIS = "0" * 64
# The fields of a row the chain covers, in the order the trigger reads them.
CHAINED = (
    "tool_call_id",
    "run_id",
    "thread_id",
    "tool_name",
    "action",
    "actor_ref",
    "via",
    "outcome",
    "detail",
    "created_at",
    "card_digest",
    "policy_digest",
    "args_digest",
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def canonical(value: Any) -> bytes:
    """``value`` as canonical JSON: sorted keys, no spaces, UTF-8."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return text.encode()


def digest(value: Any) -> str:
    """SHA-256 (hex) of ``value``'s canonical JSON."""
    return hashlib.sha256(canonical(value)).hexdigest()


@dataclass(frozen=True)
class CallCard:
    """What a decider is shown of a waiting call: the tool, its args, the tool's summary, the
    confirmation, and the requirement (who decides, until when, how many approvals)."""

    tool_name: str
    args: dict[str, Any]
    summary: str
    confirmation: str
    approver: str
    expires_at: datetime | None
    approvals_needed: int

    @classmethod
    def of(cls, call: ToolCall, approvals_needed: int = 1) -> CallCard:
        return cls(
            tool_name=call.tool_name,
            args=call.args,
            summary=call.summary,
            confirmation=call.confirmation,
            approver=call.approver,
            expires_at=call.expires_at,
            approvals_needed=approvals_needed,
        )

    def as_dict(self) -> dict[str, Any]:
        shown = asdict(self)
        shown["expires_at"] = self.expires_at.isoformat() if self.expires_at else None
        return shown

    @property
    def digest(self) -> str:
        """``card_digest``: SHA-256 of the card's canonical JSON."""
        return digest(self.as_dict())


def policy_digest() -> str:
    """The policy in force: its class (``AGENT["APPROVAL_POLICY"]``) and the configured rules
    (computed per attempt: either setting may change, and hashing them costs microseconds)."""
    return digest({"class": policy_path(), "rules": approvals_settings().RULES})


def content(row: DecisionAttempt) -> str:
    """The chained text of ``row``, as the trigger builds it."""
    parts = []
    for name in CHAINED:
        value = getattr(row, name)
        if isinstance(value, datetime):
            value = str((value - _EPOCH) // timedelta(microseconds=1))
        text = str(value)
        parts.append(f"{len(text)}:{text}")
    return "".join(parts)


def link(prev: str, row: DecisionAttempt) -> str:
    """The digest ``row`` should carry after ``prev``."""
    return hashlib.sha256((prev + content(row)).encode()).hexdigest()


@dataclass(frozen=True)
class Break:
    """The first row that breaks the chain, and how."""

    seq: int
    attempt_id: int
    reason: str


def verify(rows: Iterable[DecisionAttempt]) -> Break | None:
    """Recompute the chain over ``rows`` (in ``seq`` order, from the first): the first row whose
    place, previous digest or own digest is not what the rows before it make it; ``None``: whole."""
    prev, expected = GENESIS, 1
    for row in rows:
        assert row.seq is not None
        if row.seq != expected:
            return Break(row.seq, row.pk, f"expected row {expected} of the chain: rows are missing")
        if row.prev_digest != prev:
            return Break(row.seq, row.pk, "its prev_digest is not the previous row's digest")
        if row.digest != link(prev, row):
            return Break(row.seq, row.pk, "its content does not match its digest")
        prev, expected = row.digest, expected + 1
    return None


def chained() -> Iterator[DecisionAttempt]:
    """Every chained row in chain order, streamed (a server-side cursor)."""
    rows = DecisionAttempt.objects.filter(seq__isnull=False).order_by("seq")
    return rows.iterator(chunk_size=2000)


def exported(row: DecisionAttempt) -> dict[str, Any]:
    """One row as a line of the JSON-lines export."""
    data: dict[str, Any] = {name: getattr(row, name) for name in CHAINED}
    data["created_at"] = row.created_at.isoformat()
    data.update(id=row.pk, seq=row.seq, prev_digest=row.prev_digest, digest=row.digest)
    return data


@dataclass(frozen=True)
class Checked:
    """One attempt of a call with whether its own link of the chain holds."""

    row: DecisionAttempt
    holds: bool


def of_call(call_id: str) -> list[Checked]:
    """The attempts on one call in chain order, each checked against its own digest (the whole
    chain is ``verify``'s)."""
    rows = DecisionAttempt.objects.filter(tool_call_id=call_id, seq__isnull=False).order_by("seq")
    return [Checked(row, row.digest == link(row.prev_digest, row)) for row in rows]
