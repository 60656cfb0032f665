from __future__ import annotations

from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals"
    default_auto_field = "django.db.models.BigAutoField"
    # What the core finds through the app registry (agent_core.extensions): the gate its loop
    # asks, and the jobs of its sweeper (every SWEEP_SECONDS, inline and on Celery beat), in
    # order: escalate what is due, remind of what expires soon, expire what is overdue, try
    # again the notifications whose attempts were lost, then (every ANALYTICS_REFRESH, by one
    # process) recompute the approval analytics' snapshot: last, as it takes longest.
    airlock_approval_gate = "approvals.gate.ApprovalGate"
    airlock_sweep = (
        "approvals.escalation.escalate_due",
        "approvals.reminders.remind_due",
        "approvals.services.expire_due",
        "approvals.notify.delivery.resume_lost",
        "approvals.analytics.refresh_due",
    )

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)
        from .telemetry import install

        install()  # the approval analytics as OpenTelemetry metrics, when tracing is on
