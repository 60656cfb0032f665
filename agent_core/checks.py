"""System checks for the ``AGENT`` settings (ids ``agent_core.E001``…)."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error, register
from django.utils.module_loading import import_string

from .conf import agent_settings

_DOTTED_PATHS = ("APPROVAL_GATE", "APPROVAL_POLICY", "ACTOR_RESOLVER")


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
