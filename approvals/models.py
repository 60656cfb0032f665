"""Remembered approvals, quorums and their approvals, and the audit of every decision attempt."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

from agent_core.engine import clock
from agent_core.models import Thread, ToolCall


class RememberedApprovalQuerySet(models.QuerySet["RememberedApproval"]):
    def active(self) -> RememberedApprovalQuerySet:
        now = clock.now()
        return (
            self.filter(revoked_at__isnull=True)
            .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
            .filter(Q(uses_left__isnull=True) | Q(uses_left__gt=0))
        )


class RememberedApproval(models.Model):
    """A standing yes for one tool in one thread, granted by approving with ``remember``; its
    scope (``approvals.grants``) may narrow it to calls whose args match ``arg_pins`` and to a
    number of ``uses``."""

    thread = models.ForeignKey(  # indexed by remembered_thread_tool
        Thread, on_delete=models.CASCADE, related_name="remembered", db_index=False
    )
    tool_name = models.CharField(max_length=100)
    granted_by_ref = models.CharField(max_length=200)
    source_tool_call = models.ForeignKey(
        ToolCall, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by_ref = models.CharField(max_length=200, blank=True)
    # field -> the exact value or glob a later call's arg must match ({}: any call of the tool).
    arg_pins = models.JSONField(default=dict, blank=True)
    # How many calls it may cover (None: any number), and how many it still may: counted down
    # by one conditional UPDATE per covered call (``grants.cover``).
    uses = models.PositiveIntegerField(null=True, blank=True)
    uses_left = models.IntegerField(null=True, blank=True)

    objects = RememberedApprovalQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["thread", "tool_name"], name="remembered_thread_tool")]

    def __str__(self) -> str:
        return f"{self.tool_name} in {self.thread_id} by {self.granted_by_ref}"

    @property
    def is_active(self) -> bool:
        """Not revoked, not past its expiry and not used up."""
        return (
            self.revoked_at is None
            and (self.expires_at is None or self.expires_at > clock.now())
            and (self.uses_left is None or self.uses_left > 0)
        )


class GrantUse(models.Model):
    """A call a remembered approval covered (written with the call, in its suspend
    transaction)."""

    grant = models.ForeignKey(RememberedApproval, on_delete=models.CASCADE, related_name="covered")
    tool_call = models.OneToOneField(ToolCall, on_delete=models.CASCADE, related_name="+")
    at = models.DateTimeField()

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.tool_call_id} covered by grant {self.grant_id}"


class Action(models.TextChoices):
    APPROVE = "approve"
    REJECT = "reject"
    ANSWER = "answer"
    SKIP = "skip"
    EXPIRE = "expire"
    EXTEND = "extend"
    ESCALATE = "escalate"
    NUDGE = "nudge"
    MARK_DONE = "mark_done"
    MARK_NOT_DONE = "mark_not_done"
    REVOKE = "revoke"


class DecisionAttempt(models.Model):
    """One attempt to decide a call, whatever came of it (applied, unchanged, or refused)."""

    tool_call_id = models.CharField(max_length=40, db_index=True)
    run_id = models.CharField(max_length=40, blank=True)
    thread_id = models.CharField(max_length=40, blank=True)
    tool_name = models.CharField(max_length=100, blank=True)
    action = models.CharField(max_length=16, choices=Action.choices)
    actor_ref = models.CharField(max_length=200)
    via = models.CharField(max_length=64)
    outcome = models.CharField(max_length=32)  # applied, unchanged, or an error code
    detail = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    # Evidence (``approvals.evidence``; SHA-256 hex, blank where there is none): what the decider
    # was shown (the call's ``Card``), the policy in force (its class and rules), the args an
    # approval approved. Database defaults, so that every writer of a row may leave them out.
    card_digest = models.CharField(max_length=64, blank=True, default="", db_default="")
    policy_digest = models.CharField(max_length=64, blank=True, default="", db_default="")
    args_digest = models.CharField(max_length=64, blank=True, default="", db_default="")
    # The hash chain, filled in by the table's trigger (migration 0011) whoever writes the row:
    # its place in the chain, the digest of the row before it and its own (``evidence.link``).
    seq = models.BigIntegerField(null=True, blank=True, unique=True, editable=False)
    prev_digest = models.CharField(
        max_length=64, blank=True, default="", db_default="", editable=False
    )
    digest = models.CharField(max_length=64, blank=True, default="", db_default="", editable=False)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.action} {self.tool_call_id} by {self.actor_ref}: {self.outcome}"


class AuditHead(models.Model):
    """The head of the attempts' hash chain (one row): the last ``seq`` and digest. Each new
    attempt updates it under its row lock, in its own transaction, so appends are serialized."""

    seq = models.BigIntegerField(default=0)
    prev = models.CharField(max_length=64, default="")
    digest = models.CharField(max_length=64)

    def __str__(self) -> str:
        return f"audit chain at {self.seq}"


class Quorum(models.Model):
    """The two-person rule (N of M) stamped on one call: ``needed`` distinct approvers.

    Written in the suspend transaction only for calls that need more than one yes; the call's
    ``approver`` says whose yes counts.
    """

    tool_call = models.OneToOneField(
        ToolCall, primary_key=True, on_delete=models.CASCADE, related_name="quorum"
    )
    needed = models.PositiveSmallIntegerField()
    requester_counts = models.BooleanField(default=False)

    def __str__(self) -> str:
        return f"{self.needed} approvals for {self.tool_call_id}"


class Approval(models.Model):
    """One person's yes towards a quorum, recorded as it comes."""

    tool_call = models.ForeignKey(  # indexed by approval_call_by_unique
        ToolCall, on_delete=models.CASCADE, related_name="approvals", db_index=False
    )
    by_ref = models.CharField(max_length=200)
    via = models.CharField(max_length=64)
    at = models.DateTimeField()

    class Meta:
        ordering = ["at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["tool_call", "by_ref"], name="approval_call_by_unique")
        ]

    def __str__(self) -> str:
        return f"{self.by_ref} approved {self.tool_call_id}"

    def as_dict(self) -> dict[str, str]:
        """``{by, at}`` as the API and the stream show it."""
        return {"by": self.by_ref, "at": self.at.isoformat()}


class DeliveryStatus(models.TextChoices):
    PENDING = "pending"
    SENT = "sent"
    FAILED = "failed"


class Delivery(models.Model):
    """One notification to one channel (and, for email, one person), with how its sending went."""

    tool_call = models.ForeignKey(ToolCall, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=32)  # approval-requested, approval-escalated
    channel = models.CharField(max_length=64)  # the backend's name
    recipient_ref = models.CharField(max_length=200, blank=True)  # blank: the channel as a whole
    status = models.CharField(
        max_length=8, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    attempts = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)  # the last attempt's
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    # When the attempt in flight was claimed (its lease starts); None between attempts.
    claimed_at = models.DateTimeField(null=True, blank=True)
    # When the next attempt is due if nobody is working on it: on record, at once; once claimed,
    # when the lease is over; after a failure, when the backoff is. The sweep (``resume_lost``)
    # re-schedules a pending row that is a whole lease past it: the attempts that would have
    # come were lost with their process or message.
    due_at = models.DateTimeField(default=timezone.now)
    # How many times the sweep queued the row again since an attempt of it was last claimed: each
    # time it waits twice as long before the next (a backed-up queue is not lost, only late).
    sweeps = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["created_at", "id"]
        verbose_name_plural = "deliveries"
        indexes = [
            models.Index(
                fields=["due_at"],
                name="approvals_delivery_due",
                condition=Q(status=DeliveryStatus.PENDING),
            )
        ]

    def __str__(self) -> str:
        to = f" to {self.recipient_ref}" if self.recipient_ref else ""
        return f"{self.event} of {self.tool_call_id} via {self.channel}{to}: {self.status}"


class NotificationOptOut(models.Model):
    """A person who asked not to be notified of waiting calls (they still see them in the inbox)."""

    actor_ref = models.CharField(max_length=200, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.actor_ref} opted out of notifications"


class LinkUse(models.Model):
    """A signed decision link that has been used: the row makes every link single-use."""

    nonce = models.CharField(max_length=64, unique=True)
    tool_call_id = models.CharField(max_length=40)
    actor_ref = models.CharField(max_length=200)
    action = models.CharField(max_length=16, choices=Action.choices)
    used_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"link {self.nonce} of {self.tool_call_id} used by {self.actor_ref}"


class Escalation(models.Model):
    """A policy's escalation stamped on one call: at ``due_at`` (some time before its deadline),
    if it still waits, ``role`` is told and, with ``may_decide``, may decide it too."""

    tool_call = models.OneToOneField(
        ToolCall, primary_key=True, on_delete=models.CASCADE, related_name="escalation"
    )
    role = models.CharField(max_length=100)
    may_decide = models.BooleanField(default=False)
    due_at = models.DateTimeField()
    escalated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(
                fields=["due_at"],
                name="escalation_due",
                condition=models.Q(escalated_at__isnull=True),
            )
        ]

    def __str__(self) -> str:
        return f"{self.tool_call_id} escalates to {self.role} at {self.due_at}"


class Reminder(models.Model):
    """The one reminder of a pending call with a deadline (``APPROVALS["REMIND_BEFORE"]``):
    stamped with the request, claimed once by the sweep that sends it (``sent_at``)."""

    tool_call = models.OneToOneField(
        ToolCall, primary_key=True, on_delete=models.CASCADE, related_name="reminder"
    )
    sent_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"reminder of {self.tool_call_id}" + (" (sent)" if self.sent_at else "")


class AnalyticsSnapshot(models.Model):
    """The approval analytics as the sweep last computed them (``approvals.analytics``): one
    row, replaced every ``ANALYTICS_REFRESH``, which the metrics page and the OpenTelemetry
    gauges read instead of scanning the calls."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    computed_at = models.DateTimeField()
    since = models.DateTimeField()  # the start of the window the numbers cover
    took = models.FloatField()  # seconds the computation took
    numbers = models.JSONField()  # analytics.Analytics without the pending ages (those are live)

    def __str__(self) -> str:
        return f"approval analytics as of {self.computed_at}"
