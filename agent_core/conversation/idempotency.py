"""Idempotent starts: ``Idempotency-Key`` on ``POST /agent/chat`` (SPEC §8).

A key belongs to the actor who sent it. The first request with a key stores its answer in the
transaction that starts the turn; the same key with the same body answers that again (a replay)
and starts nothing, while another body is refused (``idempotency_key_reused``). A second request
arriving while the first has not committed cannot be answered yet: ``run_busy`` with
``Retry-After``. Keys are kept for ``IDEMPOTENCY_KEY_TTL`` seconds; ``agent cleanup`` deletes
the expired ones.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from ..conf import agent_settings
from ..engine import rows, sql
from ..exceptions import IdempotencyKeyReused, RunBusy
from ..models import IdempotencyKey

MAX_KEY_LENGTH = 255
BUSY_RETRY_SECONDS = 1  # the first request commits in well under a second


@dataclass(frozen=True)
class Answer:
    """A start's answer; ``replay``: it is the stored answer of an earlier request."""

    body: dict[str, Any]
    replay: bool = False


def digest(body: dict[str, Any]) -> str:
    """The sha256 of the request body as canonical JSON (key order and spacing do not count)."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


@transaction.atomic
def start_once(
    actor_ref: str, key: str, body: dict[str, Any], start: Callable[[], dict[str, Any]]
) -> Answer:
    """``start()`` once per ``(actor_ref, key)``; the stored answer for a repeat of ``body``."""
    wanted = digest(body)
    # Held to commit: while one request with the key works, another cannot start or replay.
    row = rows.fetch_one(sql.TRY_ADVISORY_LOCK, {"name": f"airlock-idem:{actor_ref}:{key}"})
    if not (row and row[0]):
        raise RunBusy(retry_after=BUSY_RETRY_SECONDS)
    now = timezone.now()
    stored = IdempotencyKey.objects.filter(actor_ref=actor_ref, key=key).first()
    if stored is not None and stored.expires_at <= now:
        stored.delete()
        stored = None
    if stored is not None:
        if stored.request_digest != wanted:
            raise IdempotencyKeyReused()
        return Answer(stored.response, replay=True)
    answer = start()
    ttl = timedelta(seconds=agent_settings().IDEMPOTENCY_KEY_TTL)
    IdempotencyKey.objects.create(
        actor_ref=actor_ref, key=key, request_digest=wanted, response=answer, expires_at=now + ttl
    )
    return Answer(answer)


def delete_expired() -> int:
    """Delete the keys whose window has passed; returns how many."""
    deleted, _ = IdempotencyKey.objects.filter(expires_at__lte=timezone.now()).delete()
    return deleted
