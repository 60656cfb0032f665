"""Refusals of the approval port; each carries the stable code of SPEC §10 and its HTTP status."""

from __future__ import annotations

from http import HTTPStatus

from agent_core.exceptions import AgentCoreError


class ApprovalExpired(AgentCoreError):
    """The approval request expired before the decision arrived."""

    code = "approval_expired"
    status_code = HTTPStatus.GONE


class NotApprover(AgentCoreError):
    """You may not decide this call."""

    code = "not_approver"
    status_code = HTTPStatus.FORBIDDEN


class InvalidDecision(AgentCoreError):
    """The decision's arguments or answer do not fit the tool's schema."""

    code = "invalid"
    status_code = HTTPStatus.BAD_REQUEST


class EditNeedsApprover(AgentCoreError):
    """The edited arguments need another approver's yes: approve the call as proposed, or
    reject it and let the model ask again."""

    code = "edit_needs_approver"
    status_code = HTTPStatus.FORBIDDEN


class GrantWiderThanCall(AgentCoreError):
    """A grant may only narrow the approved call: every pin must match that call's own args, and
    its uses and ttl must be positive and no longer than a plain grant's."""

    code = "grant_wider_than_call"
    status_code = HTTPStatus.BAD_REQUEST
