"""Request bodies of the decision endpoints and the shape of pending calls and grants."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agent_core.agents import get_agent
from agent_core.choices import SYSTEM_VIAS
from agent_core.exceptions import AgentCoreError
from agent_core.models import ToolCall
from agent_core.toolcalls import delegation

from .. import grants, quorum
from ..evidence import CallCard
from ..models import RememberedApproval
from ..pending import PendingRow


class StrictBooleanField(serializers.BooleanField):
    """A JSON ``true`` / ``false`` only: ``"yes"`` or ``1`` is a mistake, not a decision."""

    default_error_messages = {"invalid": "Must be true or false."}

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


class _Decision(serializers.Serializer[Any]):
    tool_call_id = serializers.CharField(max_length=40)
    via = serializers.CharField(
        min_length=1,
        max_length=64,
        default="web",
        help_text=f"the surface deciding; reserved: {', '.join(sorted(SYSTEM_VIAS))}",
    )

    def validate_via(self, value: str) -> str:
        if value in SYSTEM_VIAS:
            raise serializers.ValidationError(f"{value!r} is reserved for the system.")
        return value


class GrantScopeSerializer(serializers.Serializer[Any]):
    """A grant's scope: later calls are covered only when their args match every pin (a
    field's exact value, or a glob for a string), at most ``uses`` times, for ``ttl`` seconds.
    Each pin must match the approved call's own args (else 400 ``grant_wider_than_call``)."""

    args = serializers.DictField(
        required=False, help_text="field -> exact value, or a glob (*, ?, [...]) for a string"
    )
    uses = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=grants.MAX_USES
    )
    ttl = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=grants.MAX_TTL_SECONDS,
        help_text="seconds; at most the tool's REMEMBER_TTL",
    )


@extend_schema_field({"oneOf": [{"type": "boolean"}, {"$ref": "#/components/schemas/GrantScope"}]})
class RememberField(serializers.Field[Any, Any, Any, Any]):
    """``true`` (the whole tool in the thread), ``false``, or a scope object that narrows it."""

    default_error_messages = {"invalid": "Must be true, false or a scope object."}

    def to_internal_value(self, data: Any) -> bool | grants.Scope:
        if isinstance(data, bool):
            return data
        if not isinstance(data, dict):
            self.fail("invalid")
        GrantScopeSerializer(data=data).is_valid(raise_exception=True)
        return grants.parse(data)  # which refuses the keys a serializer would drop

    def to_representation(self, value: Any) -> Any:
        return value.as_dict() if isinstance(value, grants.Scope) else value


class ApproveSerializer(_Decision):
    """``{tool_call_id, remember?, via?, args?}``: ``args`` approves the call with edited args;
    ``remember`` is ``true`` or a scope (``GrantScope``)."""

    remember = RememberField(default=False)
    args = serializers.DictField(required=False)


class RejectSerializer(_Decision):
    """``{tool_call_id, reason?, via?}``: the reason is told to the model."""

    reason = serializers.CharField(max_length=4096, allow_blank=True, default="")


class AnswerSerializer(_Decision):
    """``{tool_call_id, answer, via?}``: the answer must fit the question's JSON schema."""

    answer = serializers.JSONField()


class MarkDoneSerializer(_Decision):
    """``{tool_call_id, result?, via?}``: ``result`` (any JSON) is what the model is told."""

    result = serializers.JSONField(required=False)


class MarkNotDoneSerializer(_Decision):
    """``{tool_call_id, via?}``: the call runs again (after a fresh approval if its tool asks)."""


class ExtendSerializer(_Decision):
    """``{tool_call_id, ttl? | expires_at?, via?}``: ``ttl`` is seconds from now."""

    ttl = serializers.IntegerField(min_value=1, max_value=365 * 24 * 3600, required=False)
    expires_at = serializers.DateTimeField(required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("ttl" in attrs) == ("expires_at" in attrs):
            raise serializers.ValidationError("Give either ttl (seconds) or expires_at.")
        return attrs


class ApprovalSerializer(serializers.Serializer[Any]):
    """One person's yes towards a call's quorum."""

    by = serializers.CharField(source="by_ref")
    at = serializers.DateTimeField()


class DecisionResultSerializer(serializers.Serializer[Any]):
    """What a decision answers: the call's status now, and whether this request changed it.

    A call that needs several approvals also says how many (``approvals_needed``) and who gave
    theirs so far (``approvals``), so a yes that leaves it pending reads "1 of 2".
    """

    tool_call_id = serializers.CharField()
    status = serializers.CharField()
    outcome = serializers.ChoiceField(choices=["applied", "unchanged"])
    expires_at = serializers.DateTimeField(allow_null=True, required=False)
    approvals = ApprovalSerializer(many=True, required=False)
    approvals_needed = serializers.IntegerField(required=False)


class PendingCallSerializer(serializers.ModelSerializer[ToolCall]):
    """A call waiting on a person, with everything needed to decide it without another read.

    The schema of the pending inbox's rows; the inbox itself serializes its row tuples with
    ``pending_results``, to the same shape (a test holds the two together).
    """

    tool_call_id = serializers.CharField(source="id")
    agent = serializers.CharField(source="run.agent")
    requester = serializers.CharField(source="requester_ref")
    answer_schema = serializers.SerializerMethodField()
    approvals = serializers.SerializerMethodField()
    approvals_needed = serializers.SerializerMethodField()
    chain = serializers.SerializerMethodField()

    class Meta:
        model = ToolCall
        fields = [
            "tool_call_id",
            "status",
            "tool_name",
            "kind",
            "args",
            "confirmation",
            "summary",
            "approver",
            "requester",
            "thread_id",
            "run_id",
            "agent",
            "requested_at",
            "expires_at",
            "answer_schema",
            "approvals",
            "approvals_needed",
            "chain",
        ]

    @extend_schema_field(ApprovalSerializer(many=True))
    def get_approvals(self, call: ToolCall) -> list[dict[str, Any]]:
        """The approvals given so far (load them with ``quorum.attach`` for a list)."""
        return ApprovalSerializer(quorum.standing(call)[1], many=True).data  # type: ignore[return-value]

    def get_approvals_needed(self, call: ToolCall) -> int:
        """How many distinct approvers the call needs (1 unless its policy set a quorum)."""
        return quorum.standing(call)[0]

    def get_chain(self, call: ToolCall) -> list[str]:
        """The agents from the run a person started down to the call's (``["support",
        "billing"]``: billing's call, delegated by support; SPEC §14)."""
        return delegation.chain_of(call.run)

    def get_answer_schema(self, call: ToolCall) -> dict[str, Any] | None:
        """A human tool's answer schema (read from the declared tool, not the database)."""
        return _answer_schema(call.kind, call.run.agent, call.tool_name)


def pending_results(rows: list[PendingRow]) -> list[dict[str, Any]]:
    """``PendingCallSerializer``'s output for a page of row tuples, as plain dicts: the page is
    read on every visit, and a serializer's per-row field work cost more than its query."""
    when = serializers.DateTimeField().to_representation  # the API's datetime format
    return [_pending_result(row, when) for row in rows]


def _pending_result(row: PendingRow, when: Any) -> dict[str, Any]:
    # What the decider is shown comes from the call's ``CallCard``, the value ``card_digest``
    # hashes (approvals.evidence): the console's card renders the same one.
    shown = CallCard(
        tool_name=row.tool_name,
        args=row.args,
        summary=row.summary,
        confirmation=row.confirmation,
        approver=row.approver,
        expires_at=row.expires_at,
        approvals_needed=row.approvals_needed,
    )
    return {
        "tool_call_id": row.id,
        "status": row.status,
        "tool_name": shown.tool_name,
        "kind": row.kind,
        "args": shown.args,
        "confirmation": shown.confirmation,
        "summary": shown.summary,
        "approver": shown.approver,
        "requester": row.requester_ref,
        "thread_id": row.thread_id,
        "run_id": row.run_id,
        "agent": row.agent,
        "requested_at": when(row.requested_at),
        "expires_at": when(shown.expires_at) if shown.expires_at else None,
        "answer_schema": _answer_schema(row.kind, row.agent, row.tool_name),
        "approvals": [{"by": by, "at": when(at)} for by, at in row.approvals],
        "approvals_needed": shown.approvals_needed,
        # No query for a run nobody delegated to (delegation.chain_of).
        "chain": [row.agent] if row.parent_run_id is None else delegation.chain(row.run_id),
    }


def _answer_schema(kind: str, agent: str, tool_name: str) -> dict[str, Any] | None:
    """A human tool's answer schema (read from the declared tool, not the database)."""
    if kind != "human":
        return None
    try:
        return get_agent(agent).get_tool(tool_name).answer_schema
    except AgentCoreError:
        return None


class PendingPageSerializer(serializers.Serializer[Any]):
    """One page of the pending inbox; ``next`` (and ``next_cursor``) lead to the next page."""

    results = PendingCallSerializer(many=True)
    next_cursor = serializers.CharField(allow_null=True)
    next = serializers.URLField(allow_null=True)


class RememberedApprovalSerializer(serializers.ModelSerializer[RememberedApproval]):
    """A standing yes for one tool in one thread, its scope, and the calls it covered."""

    source_tool_call_id = serializers.CharField(allow_null=True)
    active = serializers.SerializerMethodField()
    scope = serializers.SerializerMethodField()
    covered = serializers.SerializerMethodField()

    class Meta:
        model = RememberedApproval
        fields = [
            "id",
            "thread_id",
            "tool_name",
            "granted_by_ref",
            "source_tool_call_id",
            "created_at",
            "expires_at",
            "revoked_at",
            "revoked_by_ref",
            "active",
            "scope",
            "uses_left",
            "covered",
        ]

    def get_active(self, grant: RememberedApproval) -> bool:
        return grant.is_active

    @extend_schema_field(GrantScopeSerializer)
    def get_scope(self, grant: RememberedApproval) -> dict[str, Any]:
        """The pins and uses it was granted with, and its ttl (s) as granted."""
        return grants.scope_as_granted(grant).as_dict()

    def get_covered(self, grant: RememberedApproval) -> list[str]:
        """The ids of the calls it covered, oldest first (prefetch ``covered`` for a list)."""
        return [use.tool_call_id for use in grant.covered.all()]


class SkipSerializer(_Decision):
    """``{tool_call_id, via?}``: skip a human tool's question (recorded ``rejected``)."""


class RequirementSerializer(serializers.Serializer[Any]):
    """The policy's answer for every call of a tool: who must say yes, and for how long."""

    # The metaclass takes declared fields off the class: this does not shadow Field.required.
    required = serializers.BooleanField()  # type: ignore[assignment]
    approver = serializers.CharField(source="stored_approver")
    ttl = serializers.SerializerMethodField(help_text="seconds; null: no expiry")
    quorum = serializers.IntegerField()

    def get_ttl(self, requirement: Any) -> float | None:
        return requirement.ttl.total_seconds() if requirement.ttl is not None else None


class ToolEntrySerializer(serializers.Serializer[Any]):
    """One tool of an agent (``GET /agent/tools``)."""

    name = serializers.CharField()
    kind = serializers.CharField(help_text="read, action or human")
    description = serializers.CharField()
    approval_mode = serializers.CharField(
        help_text="actions: 'blocking' or 'independent' (a proposal); '' otherwise"
    )
    parameters = serializers.JSONField(help_text="the arguments' JSON schema")
    requirement = RequirementSerializer(
        allow_null=True, help_text="null: not an action, or it depends on the call's args"
    )
    confirmation = serializers.CharField(help_text="the decider's line, a template over the args")
    prompt = serializers.CharField(help_text="human tools: the question shown to the user")
    confirm = serializers.CharField(
        help_text="'token': callable with a preview and a confirm_token"
        " (agent_core.toolcalls.confirmed)"
    )


class ToolsQuerySerializer(serializers.Serializer[Any]):
    """``?agent=<name>``."""

    agent = serializers.CharField(max_length=100)


class ToolListSerializer(serializers.Serializer[Any]):
    """``GET /agent/tools``: the agent's tools, in the order it offers them."""

    agent = serializers.CharField()
    results = ToolEntrySerializer(many=True)
