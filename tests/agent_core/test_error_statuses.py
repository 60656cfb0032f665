"""Every refusal carries the HTTP status SPEC §8 gives its code, on its class: the one table the
API, the console, the decision links and the command line read."""

from __future__ import annotations

from agent_core.exceptions import AgentCoreError
from approvals import exceptions as approvals_exceptions
from approvals import links

# The statuses the API answered before they moved onto the classes (SPEC §8, §10).
STATUS_BY_CODE = {
    "not_found": 404,
    "agent_not_found": 404,
    "tool_not_found": 404,
    "invalid": 400,
    "not_approver": 403,
    "edit_needs_approver": 403,
    "forbidden": 403,
    "run_active": 409,
    "run_not_active": 409,
    "already_decided": 409,
    "already_answered": 409,
    "approval_expired": 410,
    "quota_exceeded": 429,
    "run_busy": 409,
    "idempotency_key_reused": 422,
    "turn_started": 409,
    "link_invalid": 400,
    "link_expired": 410,
    "link_used": 409,
    # issue #35
    "queue_full": 429,
    "throttled": 429,
    "link_inactive": 403,
    "link_other_person": 403,
    "too_many_streams": 429,
    "service_unavailable": 503,  # SPEC §20
    "mcp_unavailable": 503,  # SPEC §18
    # SPEC §16: a run past its limits
    "run_limit_exceeded": 422,
    "tool_loop_detected": 422,
    # SPEC §17: proposals and confirmed tools
    "proposal_drift": 409,
    "tool_not_confirmable": 400,
    "confirm_token_invalid": 400,
    "confirm_token_mismatch": 409,
    "confirm_token_expired": 410,
    "confirm_token_used": 409,
    "tool_failed": 422,
    "grant_wider_than_call": 400,
}


def subclasses(cls: type[AgentCoreError]) -> list[type[AgentCoreError]]:
    found = cls.__subclasses__()
    return found + [sub for child in found for sub in subclasses(child)]


def test_each_error_class_carries_the_status_of_its_code():
    assert approvals_exceptions.ApprovalExpired in subclasses(AgentCoreError)
    assert links.LinkUsed in subclasses(AgentCoreError)
    statuses = {cls.__name__: (cls.code, cls.status_code) for cls in subclasses(AgentCoreError)}
    for name, (code, status) in statuses.items():
        assert status == STATUS_BY_CODE.get(code, 500), (name, code, status)
    assert AgentCoreError.status_code == 500  # a failure, not a refusal
