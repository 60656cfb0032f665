"""System checks of the console (ids ``console.W001``…)."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.checks import CheckMessage, Warning, register


@register()
def check_login_throttled(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The console's login should not accept unlimited password guesses."""
    backends = getattr(settings, "AUTHENTICATION_BACKENDS", [])
    if apps.is_installed("axes") and any(b.startswith("axes.backends.") for b in backends):
        return []
    return [
        Warning(
            "The console's login accepts unlimited password guesses: django-axes is not set up.",
            id="console.W001",
            hint="Add 'axes' to INSTALLED_APPS, 'axes.backends.AxesStandaloneBackend' first in "
            "AUTHENTICATION_BACKENDS and 'axes.middleware.AxesMiddleware' last in MIDDLEWARE "
            "(see the README, 'The console').",
        )
    ]
