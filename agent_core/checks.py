"""System checks for the ``AGENT`` settings (ids ``agent_core.E001``…)."""

from __future__ import annotations

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
def check_durable_chain(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The durable runner's queues are named and its slice of steps is bounded."""
    try:
        settings = agent_settings()
    except TypeError:
        return []  # reported by check_agent_settings
    errors: list[CheckMessage] = []
    for key in ("MODEL_QUEUE", "TOOL_QUEUE"):
        value = getattr(settings, key)
        if not isinstance(value, str) or not value.strip():
            errors.append(
                Error(
                    f"AGENT[{key!r}] must name a Celery queue, not {value!r}.",
                    id="agent_core.E010",
                    hint="The defaults: MODEL_QUEUE 'agent.llm', TOOL_QUEUE 'agent.tool'.",
                )
            )
    steps, seconds = settings.CHAIN_MAX_STEPS, settings.CHAIN_MAX_SECONDS
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        errors.append(
            Error(
                f"AGENT['CHAIN_MAX_STEPS'] must be a whole number of at least 1, not {steps!r}.",
                id="agent_core.E011",
                hint="How many steps one durable task takes before it hands the run on.",
            )
        )
    if not isinstance(seconds, int | float) or isinstance(seconds, bool) or not seconds > 0:
        errors.append(
            Error(
                f"AGENT['CHAIN_MAX_SECONDS'] must be a positive number, not {seconds!r}.",
                id="agent_core.E011",
                hint="After this long a durable task starts no further step of the run.",
            )
        )
    return errors
