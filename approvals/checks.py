"""System checks for the ``APPROVALS`` settings and the configured policy (``approvals.E001``…)."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error, Warning, register
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from agent_core.conf import agent_settings

from .conf import approvals_settings
from .notify.backends import configured_backends
from .policy import ApprovalPolicy
from .rules import parse_rules


@register()
def check_approvals_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    try:
        settings = approvals_settings()
        settings.remember_ttl  # noqa: B018  (validates it)
    except (TypeError, ValueError) as exc:
        return [
            Error(
                f"APPROVALS is invalid: {exc}",
                id="approvals.E001",
                hint="See approvals/conf.py for the keys APPROVALS accepts.",
            )
        ]
    try:
        parse_rules(settings.RULES)
    except ImproperlyConfigured as exc:
        return [Error(str(exc), id="approvals.E002", hint="See approvals/rules.py for the format.")]
    try:
        backends = configured_backends()
    except ImproperlyConfigured as exc:
        return [
            Error(
                str(exc),
                id="approvals.E003",
                hint="NOTIFICATION_BACKENDS lists dotted paths or {'BACKEND', 'OPTIONS'} dicts; "
                "see approvals/notify/backends.py.",
            )
        ]
    if backends and not settings.BASE_URL:
        return [
            Warning(
                "APPROVALS['BASE_URL'] is empty: notifications carry relative links",
                id="approvals.W002",
                hint="Set it to the site's absolute URL, e.g. 'https://airlock.example.com'.",
            )
        ]
    return []


@register()
def check_policy_mirrors_its_rules(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    try:
        policy = import_string(agent_settings().APPROVAL_POLICY)
    except ImportError:
        return []  # agent_core.E003 reports it
    if not (isinstance(policy, type) and issubclass(policy, ApprovalPolicy)):
        return []
    overrides = {
        name
        for name in ("can_decide", "can_answer")
        if getattr(policy, name) is not getattr(ApprovalPolicy, name)
    }
    if overrides and policy.decidable is ApprovalPolicy.decidable:
        return [
            Warning(
                f"{policy.__name__} overrides {', '.join(sorted(overrides))} but not decidable()",
                id="approvals.W001",
                hint="The pending-approvals list filters with decidable(); mirror the rule there "
                "or the list may show calls the actor cannot decide (or hide ones they can).",
            )
        ]
    return []
