"""The core's and the approvals' models in the Django admin: read-only, linked to the console.

Support staff browse and search here; every change goes through the services (the console, the
API), never through an admin form.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from agent_core.models import Message, Run, Step, StreamFrame, Thread, ToolCall
from approvals.models import DecisionAttempt, Delivery, NotificationOptOut, RememberedApproval

from .access import may_browse_admin


class ReadOnlyAdmin(admin.ModelAdmin):
    """Viewing and searching only: no add, change or delete."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Operators browse without per-model permissions: there is nothing here to change.
        return may_browse_admin(request.user) or super().has_view_permission(request, obj)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return may_browse_admin(request.user) or super().has_module_permission(request)

    def get_readonly_fields(self, request: HttpRequest, obj: Model | None = None) -> Any:
        return [f.name for f in self.model._meta.fields] + list(self.readonly_fields)


def _run_link(run_id: str) -> str:
    if not run_id:
        return "—"
    return format_html(
        '<a href="{}">{} in the console</a>', reverse("console:run", args=[run_id]), run_id
    )


@admin.register(Thread)
class ThreadAdmin(ReadOnlyAdmin):
    list_display = ("id", "title", "owner_ref", "agent", "created_at", "runs_in_console")
    search_fields = ("id", "title", "owner_ref")
    list_filter = ("agent",)
    readonly_fields = ("runs_in_console",)

    @admin.display(description="console")
    def runs_in_console(self, obj: Thread) -> str:
        url = reverse("console:runs") + f"?thread={obj.pk}"
        return format_html('<a href="{}">runs in the console</a>', url)


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = ("id", "agent", "status", "actor_ref", "created_at", "finished_at", "console")
    list_filter = ("status", "agent", "runner")
    search_fields = ("id", "thread__id", "actor_ref", "error_code")
    date_hierarchy = "created_at"
    readonly_fields = ("console",)

    @admin.display(description="console")
    def console(self, obj: Run) -> str:
        return _run_link(obj.pk)


@admin.register(Message)
class MessageAdmin(ReadOnlyAdmin):
    list_display = ("id", "thread", "seq", "role", "created_at")
    list_filter = ("role",)
    search_fields = ("id", "thread__id", "run__id")


@admin.register(ToolCall)
class ToolCallAdmin(ReadOnlyAdmin):
    list_display = ("id", "tool_name", "kind", "status", "approver", "decided_by_ref", "console")
    list_filter = ("status", "kind", "tool_name", "approver", "decided_via")
    search_fields = ("id", "run__id", "thread__id", "requester_ref", "decided_by_ref")
    date_hierarchy = "requested_at"
    readonly_fields = ("console",)

    @admin.display(description="console")
    def console(self, obj: ToolCall) -> str:
        return _run_link(obj.run_id)


@admin.register(Step)
class StepAdmin(ReadOnlyAdmin):
    list_display = ("run", "name", "status", "attempts", "started_at", "finished_at")
    list_filter = ("status",)
    search_fields = ("run__id", "name")


@admin.register(StreamFrame)
class StreamFrameAdmin(ReadOnlyAdmin):
    list_display = ("run", "seq", "kind", "superseded", "created_at")
    list_filter = ("kind",)
    search_fields = ("run__id",)


@admin.register(DecisionAttempt)
class DecisionAttemptAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "action", "outcome", "actor_ref", "via", "tool_name", "console")
    list_filter = ("action", "outcome", "via", "tool_name")
    search_fields = ("tool_call_id", "run_id", "actor_ref")
    date_hierarchy = "created_at"
    readonly_fields = ("console",)

    @admin.display(description="console")
    def console(self, obj: DecisionAttempt) -> str:
        return _run_link(obj.run_id)


@admin.register(RememberedApproval)
class RememberedApprovalAdmin(ReadOnlyAdmin):
    list_display = ("thread", "tool_name", "granted_by_ref", "created_at", "revoked_at")
    list_filter = ("tool_name",)
    search_fields = ("thread__id", "granted_by_ref")


@admin.register(Delivery)
class DeliveryAdmin(ReadOnlyAdmin):
    list_display = (
        "created_at",
        "event",
        "channel",
        "recipient_ref",
        "status",
        "attempts",
        "sweeps",
    )
    list_filter = ("status", "channel", "event")
    search_fields = ("tool_call__id", "recipient_ref")


@admin.register(NotificationOptOut)
class NotificationOptOutAdmin(admin.ModelAdmin):
    list_display = ("actor_ref", "created_at")
    search_fields = ("actor_ref",)
