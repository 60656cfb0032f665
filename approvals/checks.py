"""System checks for the ``APPROVALS`` settings and the configured policy (``approvals.E001``…)."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError
from django.urls import NoReverseMatch, resolve, reverse
from django.utils.module_loading import import_string

from agent_core.api.errors import not_found
from agent_core.conf import agent_settings

from . import text_decisions
from .conf import ApprovalsSettings, approvals_settings
from .notify.backends import configured_backends
from .policy import REQUESTER, ApprovalPolicy, policy_path
from .rules import parse_rules


@register()
def check_approvals_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    try:
        settings = approvals_settings()
        settings.remember_ttl  # noqa: B018  (validates it)
        for tool_name in settings.MAX_EXTENSION:
            settings.max_extension(tool_name)
        for tool_name in settings.REMEMBER_TTL_BY_TOOL:
            settings.remember_ttl_for(tool_name)
        _check_notification_numbers(settings)
        settings.remind_before  # noqa: B018  (validates it)
        settings.analytics_window  # noqa: B018  (validates it)
        settings.analytics_refresh  # noqa: B018  (validates it)
        _check_rubber_stamp(settings.RUBBER_STAMP_SECONDS)
        text_decisions.words()
    except (TypeError, ValueError) as exc:
        return [
            Error(
                f"APPROVALS is invalid: {exc}",
                id="approvals.E001",
                hint="APPROVALS accepts RULES, REMEMBER_TTL, REMEMBER_TTL_BY_TOOL, MAX_EXTENSION, "
                "the notification, quorum and escalation keys (approvals/conf.py).",
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
                id="approvals.E005",
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


def _check_rubber_stamp(seconds: Any) -> None:
    if not isinstance(seconds, int | float) or isinstance(seconds, bool) or seconds <= 0:
        raise ValueError(f"RUBBER_STAMP_SECONDS must be seconds above 0, not {seconds!r}")


def _check_notification_numbers(settings: ApprovalsSettings) -> None:
    lease = settings.NOTIFICATION_LEASE
    if settings.NOTIFICATION_ATTEMPTS < 1 or lease <= 0:
        raise ValueError("NOTIFICATION_ATTEMPTS must be 1 or more, NOTIFICATION_LEASE above 0")
    limit = settings.NOTIFICATION_SWEEP_LIMIT
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise ValueError(f"NOTIFICATION_SWEEP_LIMIT must be a whole number above 0, not {limit!r}")
    # The sweep's first wait is a lease: a maximum below it would shorten every wait, not cap it.
    longest = settings.NOTIFICATION_SWEEP_BACKOFF_MAX
    if not isinstance(longest, int | float) or isinstance(longest, bool) or longest < lease:
        raise ValueError(
            "NOTIFICATION_SWEEP_BACKOFF_MAX must be seconds, at least NOTIFICATION_LEASE, "
            f"not {longest!r}"
        )


@register()
def check_policy_mirrors_its_rules(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    try:
        policy = import_string(policy_path())
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
                hint="Every list of what an actor may decide filters with decidable(): mirror the "
                "rule there in SQL, or return self.checked_one_by_one(actor) for a rule SQL "
                "cannot say; else the lists show calls the actor cannot decide (or hide ones "
                "they can).",
            )
        ]
    return []


@register(Tags.urls)
def check_api_not_shadowed(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """``agent_core.api.urls`` ends with a catch-all: included first, it hides this app's API."""
    try:
        url = reverse("approvals_api:approve")
    except NoReverseMatch:
        return []  # the project does not serve this app's API
    if resolve(url).func is not_found:
        return [
            Error(
                f"{url} is answered by agent_core's catch-all 404, not by approvals.api",
                id="approvals.E003",
                hint='Include "approvals.api.urls" before "agent_core.api.urls" in your urls.py.',
            )
        ]
    return []


@register()
def check_requester_is_no_role(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """``requester`` marks calls the thread's owner approves; a role of that name would blur it."""
    errors: list[CheckMessage] = []
    if agent_settings().OPERATOR_ROLE == REQUESTER:
        errors.append(_requester_role_error("AGENT['OPERATOR_ROLE'] is"))
    databases = kwargs.get("databases") or ()
    if "default" in databases and apps.is_installed("django.contrib.auth"):
        from django.contrib.auth.models import Group

        try:
            if Group.objects.filter(name=REQUESTER).exists():
                errors.append(_requester_role_error("a Group is named"))
        except DatabaseError:
            pass  # not migrated yet: there is no group to refuse
    return errors


def _requester_role_error(what: str) -> Error:
    return Error(
        f"{what} {REQUESTER!r}, the marker of calls the thread's owner approves",
        id="approvals.E004",
        hint="Rename it: the approval policy matches the marker apart from role names, but a "
        "policy asking actor.has_role(call.approver) would let its members decide owners' calls.",
    )
