"""Request and response shapes of the chat API."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from ..conf import agent_settings
from ..models import Message, Run, Step, Thread, ToolCall


class ChatStartSerializer(serializers.Serializer[Any]):
    """``POST /agent/chat``: a user message to an agent, on a new thread or an existing one."""

    agent = serializers.CharField(max_length=100)
    message = serializers.CharField(max_length=32_000)
    thread_id = serializers.CharField(max_length=40, required=False)


class ChatStartedSerializer(serializers.Serializer[Any]):
    run_id = serializers.CharField()
    thread_id = serializers.CharField()
    stream_url = serializers.CharField()


class RunStatusSerializer(serializers.Serializer[Any]):
    status = serializers.CharField()


class ToolCallSerializer(serializers.ModelSerializer[ToolCall]):
    """A call with its approval record and outcome."""

    class Meta:
        model = ToolCall
        fields = [
            "id",
            "run_id",
            "step_name",
            "position",
            "tool_name",
            "kind",
            "args",
            "status",
            "requires_approval",
            "approver",
            "requester_ref",
            "expires_at",
            "remember",
            "decided_by_ref",
            "decided_via",
            "decided_at",
            "reason",
            "confirmation",
            "original_args",
            "result",
            "error",
            "attempts",
            "requested_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields


class MessageSerializer(serializers.ModelSerializer[Message]):
    tool_calls = ToolCallSerializer(many=True, read_only=True)

    class Meta:
        model = Message
        fields = ["id", "seq", "role", "content", "run_id", "created_at", "tool_calls"]
        read_only_fields = fields


class ThreadSerializer(serializers.ModelSerializer[Thread]):
    class Meta:
        model = Thread
        fields = ["id", "owner_ref", "agent", "title", "active_run_id", "created_at", "updated_at"]
        read_only_fields = fields


class ThreadDetailSerializer(ThreadSerializer):
    """A thread with its transcript; each message carries its calls' approval records."""

    messages = MessageSerializer(many=True, read_only=True)

    class Meta(ThreadSerializer.Meta):
        fields = [*ThreadSerializer.Meta.fields, "messages"]
        read_only_fields = fields


class StepSerializer(serializers.ModelSerializer[Step]):
    class Meta:
        model = Step
        fields = ["name", "status", "output", "attempts", "started_at", "finished_at"]
        read_only_fields = fields


class RunSerializer(serializers.ModelSerializer[Run]):
    """A run; ``error_message`` only when ``EXPOSE_ERROR_DETAILS`` (else ``null``)."""

    error_message = serializers.SerializerMethodField()

    class Meta:
        model = Run
        fields = [
            "id",
            "thread_id",
            "agent",
            "status",
            "error_code",
            "error_message",
            "parent_run_id",
            "parent_tool_call_id",
            "actor_ref",
            "runner",
            "cancel_requested",
            "last_seq",
            "created_at",
            "updated_at",
            "finished_at",
        ]
        read_only_fields = fields

    def get_error_message(self, run: Run) -> str | None:
        return run.error_message if agent_settings().expose_error_details else None


class RunDetailSerializer(RunSerializer):
    """A run with its journal and its tool calls."""

    steps = StepSerializer(many=True, read_only=True)
    tool_calls = ToolCallSerializer(many=True, read_only=True)

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "steps", "tool_calls"]
        read_only_fields = fields
