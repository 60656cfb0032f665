"""System checks for the ``AGENT`` settings (ids ``agent_core.E001``…)."""

from __future__ import annotations

import importlib.util
from typing import Any

from django.conf import settings as django_settings
from django.core.checks import CheckMessage, Error, register
from django.utils.module_loading import import_string

from .conf import agent_settings

_DOTTED_PATHS = ("APPROVAL_GATE", "APPROVAL_POLICY", "ACTOR_RESOLVER")


@register()
def check_agent_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    try:
        settings = agent_settings()
    except TypeError as exc:
        return [
            Error(
                f"AGENT has an unknown key: {exc}",
                id="agent_core.E001",
                hint="See agent_core/conf.py for the keys AGENT accepts.",
            )
        ]
    errors: list[CheckMessage] = []
    for path in settings.AGENTS:
        try:
            import_string(path)
        except ImportError as exc:
            errors.append(
                Error(
                    f"AGENT['AGENTS'] lists {path!r}, which does not import: {exc}",
                    id="agent_core.E002",
                    hint="Give the dotted path of an agent_core.agents.Agent.",
                )
            )
    paths: dict[str, str] = {key: getattr(settings, key) for key in _DOTTED_PATHS}
    paths.update({f"PROVIDERS.{vendor}": path for vendor, path in settings.PROVIDERS.items()})
    for key, dotted in paths.items():
        try:
            import_string(dotted)
        except ImportError as exc:
            errors.append(
                Error(f"AGENT[{key!r}] = {dotted!r} does not import: {exc}", id="agent_core.E003")
            )
    return errors


@register()
def check_header_actor(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The header resolver trusts whatever a client sends: development only."""
    from .actors import HeaderResolver

    try:
        settings = agent_settings()
        resolver = import_string(settings.ACTOR_RESOLVER)
    except (TypeError, ImportError):
        return []  # reported by check_agent_settings
    trusting = isinstance(resolver, type) and issubclass(resolver, HeaderResolver)
    if trusting and not django_settings.DEBUG and not settings.ALLOW_HEADER_ACTOR:
        return [
            Error(
                "AGENT['ACTOR_RESOLVER'] is the header resolver, which lets any client claim to "
                "be anyone, and DEBUG is off.",
                id="agent_core.E004",
                hint="Use agent_core.actors.DjangoAuthResolver (or your own) in production, or "
                "set AGENT['ALLOW_HEADER_ACTOR'] = True behind a proxy that sets the headers.",
            )
        ]
    return []


@register()
def check_tracing(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    if not agent_settings().TRACING or importlib.util.find_spec("opentelemetry") is not None:
        return []
    return [
        Error(
            "AGENT['TRACING'] is on but opentelemetry is not installed",
            id="agent_core.E005",
            hint="pip install 'django-airlock[otel]' (and configure a tracer provider).",
        )
    ]
