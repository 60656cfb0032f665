"""A fake external mailer: it commits each send on its own (autocommit), like a remote API,
and can be asked afterwards whether a send with a given idempotency key happened."""

from __future__ import annotations

import os
import time

from django.db import transaction

from .models import MailerSend


def send(campaign_id: str, recipients: int, *, idempotency_key: str) -> MailerSend:
    """Send a campaign; ``DEMO_MAILER_DELAY`` seconds pass before it returns (for crash tests)."""
    with transaction.atomic():
        sent = MailerSend.objects.create(
            campaign_id=campaign_id, recipients=recipients, idempotency_key=idempotency_key
        )
    time.sleep(float(os.environ.get("DEMO_MAILER_DELAY", "0")))
    return sent


def find(idempotency_key: str) -> MailerSend | None:
    """The send recorded under ``idempotency_key``, if the mailer has one."""
    return MailerSend.objects.filter(idempotency_key=idempotency_key).first()
