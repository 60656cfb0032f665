"""Notification channels, listed by dotted path in ``APPROVALS["NOTIFICATION_BACKENDS"]``.

A backend renders a ``Notice`` and sends it, raising on failure (the delivery is retried with
backoff and recorded). ``per_recipient`` backends get one notice per person, with that person's
signed links; the others one notice per call for the channel as a whole.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.mail import EmailMultiAlternatives
from django.template.loader import render_to_string
from django.utils.module_loading import import_string

from ..conf import approvals_settings, per_settings
from . import signing, slack
from .notice import Notice


class DeliveryFailed(Exception):
    """The channel refused or could not take the notification."""


class NotificationBackend:
    """The base of a channel: a ``name`` (unique in the list) and ``send(notice)``."""

    name = "notification"
    per_recipient = True
    via = ""  # the surface a decision from this channel's links records ("": no links)

    def __init__(self, *, NAME: str = "", **options: Any) -> None:
        if options:
            raise ImproperlyConfigured(f"{type(self).__name__} has no options {sorted(options)}")
        self.name = NAME or self.name

    def accepts(self, notice: Notice) -> bool:
        """Whether this channel can reach the notice's recipient at all."""
        return True

    def send(self, notice: Notice) -> None:
        """Deliver the notice; raise ``DeliveryFailed`` (or any error) when it did not go out."""
        raise DeliveryFailed(f"{type(self).__name__} does not send anything")


class EmailBackend(NotificationBackend):
    """Email through Django's email framework (any ``EMAIL_BACKEND``, django-anymail too)."""

    name = "email"
    via = "email"

    def __init__(self, *, FROM_EMAIL: str = "", SUBJECT_PREFIX: str = "[Airlock] ", **rest: Any):
        super().__init__(**rest)
        self.from_email = FROM_EMAIL or settings.DEFAULT_FROM_EMAIL
        self.subject_prefix = SUBJECT_PREFIX

    def accepts(self, notice: Notice) -> bool:
        return notice.recipient is not None and bool(notice.recipient.email)

    def send(self, notice: Notice) -> None:
        assert notice.recipient is not None
        context = {"notice": notice, "args": json.dumps(notice.args, indent=2, ensure_ascii=False)}
        message = EmailMultiAlternatives(
            subject=self.subject_prefix + notice.headline,
            body=render_to_string("approvals/notify/email.txt", context),
            from_email=self.from_email,
            to=[notice.recipient.email],
        )
        message.attach_alternative(
            render_to_string("approvals/notify/email.html", context), "text/html"
        )
        message.send()


class WebhookBackend(NotificationBackend):
    """A JSON POST signed with HMAC-SHA256 (``X-Airlock-Signature``, see ``signing``).

    ``FORMAT = "slack"`` posts Slack blocks (an incoming webhook or a bot's relay accepts them);
    ``PER_RECIPIENT`` posts once per person, with their signed links, instead of once per call.
    """

    name = "webhook"

    def __init__(
        self,
        *,
        URL: str,
        SECRET: str,
        FORMAT: str = "json",
        PER_RECIPIENT: bool = False,
        TIMEOUT: float = 10.0,
        **rest: Any,
    ) -> None:
        super().__init__(**rest)
        if FORMAT not in ("json", "slack"):
            raise ImproperlyConfigured(f"WebhookBackend FORMAT must be json or slack: {FORMAT!r}")
        if not URL or not SECRET:
            raise ImproperlyConfigured("WebhookBackend needs a URL and a SECRET")
        self.url, self.secret, self.format = URL, SECRET, FORMAT
        self.via = "slack" if FORMAT == "slack" else "webhook"
        self.per_recipient, self.timeout = PER_RECIPIENT, TIMEOUT

    def send(self, notice: Notice) -> None:
        payload = slack.blocks(notice) if self.format == "slack" else notice.as_json()
        body = json.dumps(payload, separators=(",", ":")).encode()
        headers = {
            "Content-Type": "application/json",
            signing.HEADER: signing.signature(self.secret, body, int(time.time())),
        }
        try:
            response = httpx.post(self.url, content=body, headers=headers, timeout=self.timeout)
        except httpx.HTTPError as exc:
            raise DeliveryFailed(f"{type(exc).__name__}: {exc}") from exc
        if not response.is_success:
            raise DeliveryFailed(f"HTTP {response.status_code}: {response.text[:200]}")


@per_settings
def configured_backends() -> tuple[NotificationBackend, ...]:
    """The backends of ``APPROVALS["NOTIFICATION_BACKENDS"]``, built once per settings."""
    backends = tuple(_build(entry) for entry in approvals_settings().NOTIFICATION_BACKENDS)
    names = [b.name for b in backends]
    if len(set(names)) != len(names):
        raise ImproperlyConfigured(f"notification backends need distinct NAMEs, not {names}")
    return backends


def backend_named(name: str) -> NotificationBackend | None:
    """The configured backend called ``name`` (``None`` when it was removed since)."""
    return next((b for b in configured_backends() if b.name == name), None)


def _build(entry: Any) -> NotificationBackend:
    if isinstance(entry, str):
        path, options = entry, {}
    elif isinstance(entry, dict) and isinstance(entry.get("BACKEND"), str):
        path, options = entry["BACKEND"], dict(entry.get("OPTIONS", {}))
    else:
        raise ImproperlyConfigured(
            f"a notification backend is a dotted path or {{'BACKEND', 'OPTIONS'}}: {entry!r}"
        )
    try:
        backend_class = import_string(path)
    except ImportError as exc:
        raise ImproperlyConfigured(f"notification backend {path!r} does not import") from exc
    try:
        backend = backend_class(**options)
    except TypeError as exc:
        raise ImproperlyConfigured(f"notification backend {path!r}: {exc}") from exc
    if not isinstance(backend, NotificationBackend):
        raise ImproperlyConfigured(f"{path!r} is not a NotificationBackend")
    return backend
