"""Errors of the agent core; each docstring is the default message, each has a stable code.

Like DRF's ``APIException``, each class carries the HTTP status it answers (SPEC §8, §10): the
REST API (``agent_core.api.errors``), the console and the decision links read it there, so a
refusal means the same on every surface. 500 is a failure, not a refusal.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any, ClassVar


class AgentCoreError(Exception):
    """An agent core operation failed."""

    code: ClassVar[str] = "run_failed"
    status_code: ClassVar[int] = HTTPStatus.INTERNAL_SERVER_ERROR

    def __init__(self, message: str | None = None, *, errors: Any = None) -> None:
        super().__init__(message or self.__doc__ or self.code)
        self.errors = errors  # field-level details, e.g. pydantic's errors for a 400

    @property
    def message(self) -> str:
        return str(self.args[0])


class NotFound(AgentCoreError):
    """No such object."""

    code = "not_found"
    status_code = HTTPStatus.NOT_FOUND


class AgentNotFound(AgentCoreError):
    """No agent is registered under that name."""

    code = "agent_not_found"
    status_code = HTTPStatus.NOT_FOUND


class ToolNotFound(AgentCoreError):
    """The agent has no tool of that name."""

    code = "tool_not_found"
    status_code = HTTPStatus.NOT_FOUND


class McpUnavailable(AgentCoreError):
    """The MCP server is unavailable."""

    code = "mcp_unavailable"
    status_code = HTTPStatus.SERVICE_UNAVAILABLE


class RunActive(AgentCoreError):
    """The thread already has an active run; wait for it to finish or cancel it."""

    code = "run_active"
    status_code = HTTPStatus.CONFLICT


class RunNotActive(AgentCoreError):
    """The run this call belongs to is no longer active."""

    code = "run_not_active"
    status_code = HTTPStatus.CONFLICT


class AlreadyDecided(AgentCoreError):
    """The call has already been decided differently."""

    code = "already_decided"
    status_code = HTTPStatus.CONFLICT


class AlreadyAnswered(AgentCoreError):
    """The question has already been answered."""

    code = "already_answered"
    status_code = HTTPStatus.CONFLICT


class InvalidTransition(AgentCoreError):
    """A status change that the state machine does not allow was attempted."""

    code = "invalid_transition"


class LeaseLost(AgentCoreError):
    """This worker no longer holds the run's lease; another driver owns it now."""

    code = "lease_lost"


class ReplayDiverged(AgentCoreError):
    """The run's journal names a step the deployed code does not reach."""

    code = "replay_diverged"


class ModelError(AgentCoreError):
    """The model provider failed."""

    code = "model_error"

    def __init__(self, message: str | None = None, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class ModelNoOutput(AgentCoreError):
    """The model returned neither text nor tool calls."""

    code = "model_no_output"


class RunLimitExceeded(AgentCoreError):
    """The run reached its limit of model steps or tool calls (``MAX_STEPS_PER_RUN``,
    ``MAX_TOOL_CALLS_PER_RUN``)."""

    code = "run_limit_exceeded"
    status_code = HTTPStatus.UNPROCESSABLE_ENTITY


class ToolLoopDetected(AgentCoreError):
    """The model kept calling the same tool with the same arguments after it was told it was
    looping (``TOOL_LOOP_LIMIT``)."""

    code = "tool_loop_detected"
    status_code = HTTPStatus.UNPROCESSABLE_ENTITY


class Cancelled(AgentCoreError):
    """The run was cancelled."""

    code = "cancelled"


class RetryAfter(AgentCoreError):
    """Try again later; ``retry_after``: seconds, sent as the ``Retry-After`` header."""

    def __init__(self, message: str | None = None, *, retry_after: int = 1) -> None:
        super().__init__(message)
        self.retry_after = max(1, retry_after)


class RunBusy(RetryAfter):
    """A request with this Idempotency-Key is still being handled; retry shortly."""

    code = "run_busy"
    status_code = HTTPStatus.CONFLICT


class ServiceUnavailable(RetryAfter):
    """A service this depends on (PostgreSQL or Redis) is away for a moment; retry shortly."""

    code = "service_unavailable"
    status_code = HTTPStatus.SERVICE_UNAVAILABLE


class QuotaExceeded(RetryAfter):
    """A quota of this actor is used up."""

    code = "quota_exceeded"
    status_code = HTTPStatus.TOO_MANY_REQUESTS


class QueueFull(RetryAfter):
    """This thread already has as many queued messages as it may hold
    (``AGENT["MAX_QUEUED_TURNS"]``): wait for one to start."""

    code = "queue_full"
    status_code = HTTPStatus.TOO_MANY_REQUESTS


class TooManyStreams(RetryAfter):
    """This actor already follows as many streams as it may at once
    (``AGENT["MAX_STREAMS_PER_ACTOR"]``): close one first."""

    code = "too_many_streams"
    status_code = HTTPStatus.TOO_MANY_REQUESTS


class Throttled(RetryAfter):
    """Too many requests: try again later."""

    code = "throttled"
    status_code = HTTPStatus.TOO_MANY_REQUESTS


class IdempotencyKeyReused(AgentCoreError):
    """This Idempotency-Key was used with a different request body."""

    code = "idempotency_key_reused"
    status_code = HTTPStatus.UNPROCESSABLE_ENTITY


class TurnStarted(AgentCoreError):
    """The queued message has already started its run (or was withdrawn)."""

    code = "turn_started"
    status_code = HTTPStatus.CONFLICT


class NotAllowed(AgentCoreError):
    """You may see this, but not do that to it."""

    code = "forbidden"
    status_code = HTTPStatus.FORBIDDEN


class InvalidHeader(AgentCoreError):
    """A request header is invalid."""

    code = "invalid"
    status_code = HTTPStatus.BAD_REQUEST


class ProposalDrift(AgentCoreError):
    """The approved proposal no longer fits: its tool, its arguments' schema, its requester or
    the policy changed since it was proposed. Nothing ran."""

    code = "proposal_drift"
    status_code = HTTPStatus.CONFLICT


class NotConfirmable(AgentCoreError):
    """This tool is not a confirmed tool (``confirm="token"``)."""

    code = "tool_not_confirmable"
    status_code = HTTPStatus.BAD_REQUEST


class ConfirmTokenInvalid(AgentCoreError):
    """The confirm_token is not one this server signed (altered, truncated or from elsewhere)."""

    code = "confirm_token_invalid"
    status_code = HTTPStatus.BAD_REQUEST


class ConfirmTokenMismatch(AgentCoreError):
    """The confirm_token was issued for another tool, another actor or other arguments: ask for
    a new preview."""

    code = "confirm_token_mismatch"
    status_code = HTTPStatus.CONFLICT


class ConfirmTokenExpired(AgentCoreError):
    """The confirm_token has expired: ask for a new preview."""

    code = "confirm_token_expired"
    status_code = HTTPStatus.GONE


class ConfirmTokenUsed(AgentCoreError):
    """The confirm_token has already committed its call; it commits once."""

    code = "confirm_token_used"
    status_code = HTTPStatus.CONFLICT


class InvalidArguments(AgentCoreError):
    """The arguments do not fit the tool's schema."""

    code = "invalid"
    status_code = HTTPStatus.BAD_REQUEST


class ToolFailed(AgentCoreError):
    """The confirmed tool raised: nothing was recorded, and its token may commit again."""

    code = "tool_failed"
    status_code = HTTPStatus.UNPROCESSABLE_ENTITY
