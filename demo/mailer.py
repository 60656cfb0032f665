"""A fake external mailer: it commits each send on its own (autocommit), like a remote API,
and can be asked afterwards whether a send with a given idempotency key happened.

Like a real provider asked to (Stripe's, Postmark's ``Idempotency-Key``), it sends once per key:
a send with a key it has seen answers the first send. That is what fences an effect a stalled
worker still has in flight when another driver runs the call again (SPEC §20): the second send
waits for the first to commit or roll back (the key's unique index), then sends or answers it.
"""

from __future__ import annotations

import os
import time

from django.db import transaction

from .models import MailerSend


def send(campaign_id: str, recipients: int, *, idempotency_key: str) -> MailerSend:
    """Send a campaign; ``DEMO_MAILER_DELAY`` seconds pass before it returns (for crash tests)."""
    with transaction.atomic():
        sent, _ = MailerSend.objects.get_or_create(
            idempotency_key=idempotency_key,
            defaults={"campaign_id": campaign_id, "recipients": recipients},
        )
    time.sleep(float(os.environ.get("DEMO_MAILER_DELAY", "0")))
    return sent


def find(idempotency_key: str) -> MailerSend | None:
    """The send recorded under ``idempotency_key``, if the mailer has one."""
    return MailerSend.objects.filter(idempotency_key=idempotency_key).first()
