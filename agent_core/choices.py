"""The closed vocabularies the models store and the SQL compares: statuses, kinds, roles, and the
markers written beside them.

Kept apart from ``models`` so that the state machine (``state``), the named SQL (``sql``) and the
apps above can name a status without the model classes.
"""

from __future__ import annotations

from django.db import models


class RunStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    WAITING = "waiting"
    CANCELLING = "cancelling"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


RUN_TERMINAL = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED})
RUN_ACTIVE = frozenset(
    {RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.WAITING, RunStatus.CANCELLING}
)


class RunKind(models.TextChoices):
    TURN = "turn"  # a turn of the agent on its thread: model steps and their calls
    PROPOSAL = "proposal"  # the execution of one decided independent proposal (SPEC §17)


class ToolKind(models.TextChoices):
    READ = "read"
    ACTION = "action"
    HUMAN = "human"


class CallStatus(models.TextChoices):
    PROPOSED = "proposed"
    PENDING_APPROVAL = "pending_approval"
    PENDING_INPUT = "pending_input"
    APPROVED = "approved"
    EXECUTING = "executing"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    IN_DOUBT = "in_doubt"
    REJECTED = "rejected"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    REFUSED = "refused"
    SUPERSEDED = "superseded"  # a pending proposal replaced by a newer one (SPEC §17)


CALL_PENDING = frozenset({CallStatus.PENDING_APPROVAL, CallStatus.PENDING_INPUT})
CALL_TERMINAL = frozenset(
    {
        CallStatus.SUCCEEDED,
        CallStatus.FAILED,
        CallStatus.REJECTED,
        CallStatus.EXPIRED,
        CallStatus.CANCELLED,
        CallStatus.REFUSED,
        CallStatus.SUPERSEDED,
    }
)


class Role(models.TextChoices):
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


# ``ToolCall.approver`` of a call the thread's owner approves: a marker, never a role name
# (the system check ``approvals.E004`` refuses a group or role of that name).
REQUESTER = "requester"

# ``decided_via`` values the system writes itself; a client may never claim one (SPEC §7).
SYSTEM_VIAS = frozenset({"policy", "remembered", "expiry", "cancel", "replacement"})


class StepStatus(models.TextChoices):
    STARTED = "started"
    COMPLETED = "completed"


class QueuedStatus(models.TextChoices):
    QUEUED = "queued"
    STARTED = "started"
    WITHDRAWN = "withdrawn"
