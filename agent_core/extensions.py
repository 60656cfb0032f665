"""What other installed apps plug into the core, declared on their ``AppConfig`` as class
attributes (the way an app declares its ``default_auto_field``), so the core finds them through
Django's app registry and never imports those apps:

* ``airlock_approval_gate``: the dotted path of an approval gate (``agent_core.gate``), used when
  ``AGENT["APPROVAL_GATE"]`` is not set; the first app in ``INSTALLED_APPS`` that declares one
  wins. ``approvals`` declares its own.
* ``airlock_sweep``: dotted paths of callables (no arguments) the sweeper runs on every round,
  before it re-drives stalled runs: every ``SWEEP_SECONDS`` in the inline runner's sweeper thread
  and on Celery beat, and once when a process starts. ``approvals`` expires its overdue requests so.
"""

from __future__ import annotations

from collections.abc import Callable

from django.apps import apps
from django.utils.module_loading import import_string


def declared_gate() -> str | None:
    """The approval gate an installed app declares, if any."""
    for config in apps.get_app_configs():
        path = getattr(config, "airlock_approval_gate", None)
        if path:
            return str(path)
    return None


def sweep_jobs() -> list[Callable[[], object]]:
    """The callables installed apps ask the sweeper to run, in ``INSTALLED_APPS`` order."""
    return [
        import_string(path)
        for config in apps.get_app_configs()
        for path in getattr(config, "airlock_sweep", ())
    ]
