"""Webhook signatures: HMAC-SHA256 over ``"<timestamp>.<body>"``, in the style of Stripe's.

A delivery carries ``X-Airlock-Signature: t=<unix seconds>,v1=<hex digest>``. A receiver
recomputes the digest with the shared secret, compares in constant time, and refuses a timestamp
older than its tolerance (a replayed request).
"""

from __future__ import annotations

import hashlib
import hmac
import time

HEADER = "X-Airlock-Signature"


def signature(secret: str, body: bytes, timestamp: int) -> str:
    """The header value that signs ``body`` sent at ``timestamp``."""
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={digest.hexdigest()}"


def verify(
    secret: str, body: bytes, header: str, *, tolerance: int = 300, now: float | None = None
) -> bool:
    """Whether ``header`` signs ``body`` with ``secret`` within ``tolerance`` seconds of now."""
    fields = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    try:
        timestamp = int(fields["t"])
    except (KeyError, ValueError):
        return False
    if abs((time.time() if now is None else now) - timestamp) > tolerance:
        return False
    expected = signature(secret, body, timestamp).split(",v1=", 1)[1]
    return hmac.compare_digest(expected, fields.get("v1", ""))
