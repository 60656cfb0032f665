"""Threads, runs, messages, tool calls, the step journal and the numbered stream frames.

Only ``state.transition`` changes a ``status``; models offer read helpers.
"""

from __future__ import annotations

from typing import Any

from django.db import models

from . import ids
from .approvers import ROLE_SEPARATOR
from .choices import (
    CALL_TERMINAL,
    RUN_TERMINAL,
    CallStatus,
    QueuedStatus,
    Role,
    RunKind,
    RunStatus,
    StepStatus,
    ToolKind,
)


class Thread(models.Model):
    """A conversation; at most one run is active on it at a time (``active_run``, set by CAS)."""

    id = models.CharField(primary_key=True, max_length=40, default=ids.thread_id, editable=False)
    owner_ref = models.CharField(max_length=200)  # indexed by thread_owner_recent
    agent = models.CharField(max_length=100)
    title = models.CharField(max_length=200, blank=True)
    active_run = models.OneToOneField(
        "Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # A fork's source (SPEC §16, ``history.fork``): plain ids, kept when the source is deleted.
    forked_from_thread_id = models.CharField(max_length=40, blank=True, default="", db_default="")
    forked_from_message_id = models.CharField(max_length=40, blank=True, default="", db_default="")

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["owner_ref", "-created_at"], name="thread_owner_recent")]

    def __str__(self) -> str:
        return self.title or self.id


class Run(models.Model):
    """One turn of an agent on a thread, driven step by step by whichever worker holds its lease."""

    id = models.CharField(primary_key=True, max_length=40, default=ids.run_id, editable=False)
    thread = models.ForeignKey(  # indexed by run_thread_recent
        Thread, on_delete=models.CASCADE, related_name="runs", db_index=False
    )
    agent = models.CharField(max_length=100)
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.QUEUED)
    # A turn, or the execution of a decided independent proposal (its one call: SPEC §17).
    kind = models.CharField(
        max_length=16, choices=RunKind.choices, default=RunKind.TURN, db_default=RunKind.TURN
    )
    error_code = models.CharField(max_length=64, blank=True)
    error_message = models.TextField(blank=True)
    parent_run = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="child_runs"
    )
    parent_tool_call = models.ForeignKey(
        "ToolCall", null=True, blank=True, on_delete=models.CASCADE, related_name="child_runs"
    )
    actor_ref = models.CharField(max_length=200)
    actor_roles = models.JSONField(default=list, blank=True)
    runner = models.CharField(max_length=16)
    # The lease: one driver at a time. ``lease_token`` only ever grows and fences every write.
    lease_owner = models.CharField(max_length=200, blank=True)
    lease_token = models.BigIntegerField(default=0)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    cancel_requested = models.BooleanField(default=False)
    last_seq = models.IntegerField(default=0)  # the highest StreamFrame.seq handed out
    # The model tokens of its steps, summed as each step is recorded (the journal has each).
    input_tokens = models.BigIntegerField(default=0, db_default=0)
    output_tokens = models.BigIntegerField(default=0, db_default=0)
    cached_tokens = models.BigIntegerField(default=0, db_default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # When its thread was truncated before it (``history.truncate``): its rows stay, for the audit.
    dropped_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["status", "-created_at"], name="run_status_recent"),
            models.Index(fields=["thread", "-created_at"], name="run_thread_recent"),
            models.Index(fields=["actor_ref", "-created_at"], name="run_actor_recent"),
            models.Index(
                fields=["lease_expires_at"],
                name="run_active_lease",
                condition=models.Q(status__in=["queued", "running", "cancelling"]),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in RUN_TERMINAL


class Message(models.Model):
    """One transcript entry; ``content`` is a list of parts: text, tool_call, tool_result."""

    id = models.CharField(primary_key=True, max_length=40, default=ids.message_id, editable=False)
    thread = models.ForeignKey(  # indexed by message_thread_seq_unique
        Thread, on_delete=models.CASCADE, related_name="messages", db_index=False
    )
    run = models.ForeignKey(Run, null=True, on_delete=models.CASCADE, related_name="messages")
    seq = models.IntegerField()
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)
    # When its thread was truncated from here or before (``history.truncate``): the model no
    # longer reads it; its calls stay, dropped with it.
    dropped_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["thread_id", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["thread", "seq"], name="message_thread_seq_unique")
        ]

    def __str__(self) -> str:
        return f"{self.role} #{self.seq}"

    @property
    def text(self) -> str:
        return "".join(p.get("text", "") for p in self.content if p.get("type") == "text")


class ToolCall(models.Model):
    """One call the model proposed, with its approval record and its outcome."""

    id = models.CharField(primary_key=True, max_length=40, default=ids.tool_call_id, editable=False)
    run = models.ForeignKey(  # indexed by call_run_step
        Run, on_delete=models.CASCADE, related_name="tool_calls", db_index=False
    )
    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="tool_calls")
    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="tool_calls")
    step_name = models.CharField(max_length=64)  # the model step that proposed it (``llm:0``)
    position = models.PositiveSmallIntegerField()  # order within that step
    provider_call_id = models.CharField(max_length=200, blank=True)
    tool_name = models.CharField(max_length=100)
    kind = models.CharField(max_length=8, choices=ToolKind.choices)
    args = models.JSONField(default=dict)
    args_digest = models.CharField(max_length=64)
    # The digest of the args the claim released for execution (``approved → executing``, in the
    # claim's compare-and-set): evidence that what ran is what was approved (SPEC §19).
    executed_args_digest = models.CharField(max_length=64, blank=True, default="", db_default="")
    status = models.CharField(max_length=16, choices=CallStatus.choices)
    # The approval record, stamped when the call is proposed and when it is decided.
    requires_approval = models.BooleanField(default=False)
    approver = models.CharField(max_length=100, blank=True)
    requester_ref = models.CharField(max_length=200, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    remember = models.BooleanField(default=False)
    decided_by_ref = models.CharField(max_length=200, blank=True)
    decided_via = models.CharField(max_length=64, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    reason = models.TextField(blank=True)
    confirmation = models.TextField(blank=True)
    summary = models.TextField(blank=True)  # the tool's one line about it (``@tool(summary=)``)
    # The tool's number for it (``@tool(amount=)``), stamped with the summary (the inbox sorts).
    amount = models.DecimalField(max_digits=18, decimal_places=2, null=True, blank=True)
    original_args = models.JSONField(null=True, blank=True)
    # An independent proposal's key: a newer pending one with the same thread, tool and key
    # supersedes it (SPEC §17).
    replacement_key = models.CharField(max_length=200, blank=True, default="", db_default="")
    # The outcome.
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    attempts = models.PositiveIntegerField(default=0)
    fence = models.BigIntegerField(default=0)  # the run lease token of the attempt that claimed it
    requested_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["requested_at", "position"]
        indexes = [
            # The inbox's indexes carry what its counts and its visibility test read (status,
            # run), so those are answered from the index alone (bench/README.md, issue 18).
            models.Index(
                fields=["approver", "requested_at"],
                include=["status", "run", "requester_ref"],
                name="call_pending_by_approver",
                condition=models.Q(status__in=["pending_approval", "pending_input"]),
            ),
            # Calls that any of several roles may approve ("legal|finance", agent_core.approvers):
            # few, so a role's inbox reads them all instead of testing every pending call's
            # approver against a pattern.
            models.Index(
                fields=["requested_at"],
                name="call_pending_any_of_roles",
                condition=models.Q(status="pending_approval", approver__contains=ROLE_SEPARATOR),
            ),
            # The pending inbox of a requester (approvals.selectors): walk in order, stop early.
            models.Index(
                fields=["requester_ref", "requested_at"],
                include=["status", "approver", "run"],
                name="call_pending_by_requester",
                condition=models.Q(status__in=["pending_approval", "pending_input"]),
            ),
            # A requester's open questions: few, so that branch of the inbox does not read every
            # pending call of the requester to find them (the index above has no status).
            models.Index(
                fields=["requester_ref", "requested_at"],
                name="call_questions_by_requester",
                condition=models.Q(status="pending_input"),
            ),
            models.Index(
                fields=["expires_at"],
                name="call_pending_expiry",
                condition=models.Q(status="pending_approval", expires_at__isnull=False),
            ),
            models.Index(fields=["run", "step_name", "position"], name="call_run_step"),
            # Who may see a run (agent_core.engine.access): the runs whose calls a role approves
            # (any
            # call, whatever its status), read from the index alone; the few calls that any of
            # several roles may approve apart, so the pattern is tested on those only.
            models.Index(
                fields=["approver", "run"],
                name="call_approver_run",
                condition=~models.Q(approver=""),
            ),
            models.Index(
                fields=["approver", "run"],
                name="call_any_of_roles_run",
                condition=models.Q(approver__contains=ROLE_SEPARATOR),
            ),
            # The calls waiting on a person in the runs a viewer may see (the console's *Waiting
            # on others*), with what its filter tests, read from the index alone.
            models.Index(
                fields=["run"],
                include=["id", "thread", "status", "approver", "requester_ref", "requested_at"],
                name="call_pending_by_run",
                condition=models.Q(status__in=["pending_approval", "pending_input"]),
            ),
            # Every call waiting on a person in the inbox's order, with what *Waiting on others*
            # tests: a page of an operator's (who sees every run) is the first 50 of a walk
            # instead of all 10,000 pending calls read and sorted (bench/README.md).
            models.Index(
                fields=["requested_at", "id"],
                include=["status", "approver", "requester_ref", "run", "thread"],
                name="call_pending_by_time",
                condition=models.Q(status__in=["pending_approval", "pending_input"]),
            ),
            models.Index(
                fields=["requested_at"],
                name="call_in_doubt",
                condition=models.Q(status="in_doubt"),
            ),
            # The inbox marks a pending call that another one duplicates (the same tool and
            # args): one probe per row of a page.
            models.Index(
                fields=["args_digest", "requested_at"],
                name="call_pending_by_digest",
                condition=models.Q(status="pending_approval"),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} {self.id} ({self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in CALL_TERMINAL

    @property
    def idempotency_key(self) -> str:
        """Stable across every attempt of this call: hand it to the provider of the side effect."""
        return f"airlock-{self.id}"


class Step(models.Model):
    """One journal entry of a run, keyed by name (``llm:0``, ``tool:tc_…``), never by position."""

    run = models.ForeignKey(  # indexed by step_run_name_unique
        Run, on_delete=models.CASCADE, related_name="steps", db_index=False
    )
    name = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=StepStatus.choices)
    output: models.JSONField[Any] = models.JSONField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=1)
    # A model step's token usage as its provider reported it (``cached``: where it reports it).
    input_tokens = models.BigIntegerField(default=0, db_default=0)
    output_tokens = models.BigIntegerField(default=0, db_default=0)
    cached_tokens = models.BigIntegerField(default=0, db_default=0)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run_id", "started_at"]
        constraints = [models.UniqueConstraint(fields=["run", "name"], name="step_run_name_unique")]

    def __str__(self) -> str:
        return f"{self.run_id} {self.name}"


class StreamFrame(models.Model):
    """One numbered frame of a run's stream; ``(run, seq)`` is unique and gapless from 1."""

    run = models.ForeignKey(  # indexed by frame_run_seq_unique
        Run, on_delete=models.CASCADE, related_name="frames", db_index=False
    )
    seq = models.IntegerField()
    kind = models.CharField(max_length=32)
    data = models.JSONField(default=dict)
    superseded = models.BooleanField(
        default=False
    )  # text of a model attempt that a crash cut short
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run_id", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="frame_run_seq_unique")]

    def __str__(self) -> str:
        return f"{self.run_id}#{self.seq} {self.kind}"

    def as_event(self) -> dict[str, Any]:
        """The frame as sent on the wire: ``{"kind": ..., **data}``."""
        return {"kind": self.kind, **self.data}


class QueuedMessageQuerySet(models.QuerySet["QueuedMessage"]):
    def waiting(self, thread_id: str) -> QueuedMessageQuerySet:
        """The thread's queued messages, in the order they will start."""
        return self.filter(thread_id=thread_id, status=QueuedStatus.QUEUED).order_by(
            "-interrupt", "created_at", "id"
        )


class QueuedMessage(models.Model):
    """A user message sent while its thread was busy (``mode: queue | interrupt``); it starts the
    thread's next run, in order, in the transaction that ends the active one."""

    id = models.CharField(primary_key=True, max_length=40, default=ids.queued_id, editable=False)
    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="queued_messages")
    agent = models.CharField(max_length=100)
    text = models.TextField()
    actor_ref = models.CharField(max_length=200)
    actor_roles = models.JSONField(default=list, blank=True)
    interrupt = models.BooleanField(default=False)  # goes ahead of plain queued messages
    status = models.CharField(
        max_length=16, choices=QueuedStatus.choices, default=QueuedStatus.QUEUED
    )
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)

    objects = QueuedMessageQuerySet.as_manager()

    class Meta:
        ordering = ["-interrupt", "created_at", "id"]
        indexes = [
            models.Index(
                fields=["thread", "-interrupt", "created_at"],
                name="queued_message_next",
                condition=models.Q(status="queued"),
            )
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.status})"


class IdempotencyKey(models.Model):
    """The first answer to a ``POST /agent/chat`` that carried ``Idempotency-Key``, per actor."""

    actor_ref = models.CharField(max_length=200)
    key = models.CharField(max_length=255)
    request_digest = models.CharField(max_length=64)  # sha256 of the request body, canonical
    response = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["actor_ref", "key"], name="idempotency_actor_key")
        ]

    def __str__(self) -> str:
        return f"{self.actor_ref} {self.key}"


class ChatAlias(models.Model):
    """A client's own name for one of its owner's threads: the AI SDK's ``useChat`` names each
    chat itself (``id``) and sends that name with every message (``POST /agent/ui-chat``)."""

    owner_ref = models.CharField(max_length=200)
    chat_id = models.CharField(max_length=64)
    thread = models.OneToOneField(Thread, on_delete=models.CASCADE, related_name="chat_alias")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "chat aliases"
        constraints = [
            models.UniqueConstraint(fields=["owner_ref", "chat_id"], name="chat_alias_owner_id")
        ]

    def __str__(self) -> str:
        return f"{self.chat_id} → {self.thread_id}"


class ConfirmedCall(models.Model):
    """A confirmed tool's committed call (SPEC §17): its ``confirm_token``'s nonce, claimed in the
    transaction that records the effect, so a token commits once."""

    nonce = models.CharField(primary_key=True, max_length=40)
    agent = models.CharField(max_length=100)
    tool_name = models.CharField(max_length=100)
    actor_ref = models.CharField(max_length=200)
    args = models.JSONField(default=dict)
    args_digest = models.CharField(max_length=64)
    result = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.tool_name} by {self.actor_ref} ({self.nonce})"
