"""Request and response shapes of the chat API."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ..conf import agent_settings
from ..conversation.turns import Mode
from ..engine import usage
from ..models import Message, QueuedMessage, Run, Step, Thread, ToolCall


class ChatStartSerializer(serializers.Serializer[Any]):
    """``POST /agent/chat``: a user message to an agent, on a new thread or an existing one; or
    ``regenerate`` (with ``thread_id``, no ``message``): the thread's last user message answered
    again in a new run (SPEC §16)."""

    agent = serializers.CharField(max_length=100, required=False)
    message = serializers.CharField(max_length=32_000, required=False)
    thread_id = serializers.CharField(max_length=40, required=False)
    regenerate = serializers.BooleanField(
        default=False,
        help_text="Answer the thread's last user message again (needs `thread_id`, no "
        "`message`; `agent` defaults to the replaced turn's). The replaced turn's calls keep "
        "their effects and are never re-run.",
    )
    mode = serializers.ChoiceField(
        choices=[m.value for m in Mode],
        default=Mode.REJECT.value,
        help_text="When the thread is busy: `reject` (409 `run_active`), `queue` (start when "
        "the active run ends), `interrupt` (cancel the active run, then start).",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["regenerate"]:
            if "thread_id" not in attrs or "message" in attrs:
                raise serializers.ValidationError(
                    "regenerate takes a thread_id and no message", code="invalid"
                )
            if attrs["mode"] != Mode.REJECT:
                raise serializers.ValidationError("regenerate takes no mode", code="invalid")
            return attrs
        missing = [name for name in ("agent", "message") if name not in attrs]
        if missing:
            raise serializers.ValidationError(
                {name: ["This field is required."] for name in missing}, code="required"
            )
        return attrs


class ChatStartedSerializer(serializers.Serializer[Any]):
    run_id = serializers.CharField()
    thread_id = serializers.CharField()
    stream_url = serializers.CharField()


class ChatQueuedSerializer(serializers.Serializer[Any]):
    """The message waits in the thread's queue; ``position`` 1 starts next."""

    queued = serializers.BooleanField()
    position = serializers.IntegerField()
    message_id = serializers.CharField()
    thread_id = serializers.CharField()


class ChatDecidedSerializer(serializers.Serializer[Any]):
    """The message was a text decision (SPEC §17): no turn started, no model was called.
    ``tool_call_id`` / ``status`` / ``outcome``: the call it decided ("" when it decided nothing
    and ``reply`` lists the calls to choose from); ``run_id`` / ``stream_url``: the run that
    goes on with the decision."""

    decided = serializers.BooleanField()
    reply = serializers.CharField()
    thread_id = serializers.CharField()
    tool_call_id = serializers.CharField()
    status = serializers.CharField()
    outcome = serializers.CharField()
    run_id = serializers.CharField()
    stream_url = serializers.CharField()


class QueuedMessageSerializer(serializers.ModelSerializer[QueuedMessage]):
    """A message waiting in its thread's queue."""

    message = serializers.CharField(source="text")

    class Meta:
        model = QueuedMessage
        fields = ["id", "thread_id", "agent", "message", "actor_ref", "interrupt", "created_at"]
        read_only_fields = fields


class UsageSerializer(serializers.Serializer[Any]):
    """Model tokens as the providers reported them."""

    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    cached_tokens = serializers.IntegerField()


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
            "summary",
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
    """A transcript entry; ``dropped_at``: when a truncation or a regenerate took it out of what
    the model reads (it stays for the audit)."""

    tool_calls = ToolCallSerializer(many=True, read_only=True)

    class Meta:
        model = Message
        fields = [
            "id",
            "seq",
            "role",
            "content",
            "run_id",
            "created_at",
            "dropped_at",
            "tool_calls",
        ]
        read_only_fields = fields


class ForkedFromSerializer(serializers.Serializer[Any]):
    thread_id = serializers.CharField()
    message_id = serializers.CharField()


class ThreadSerializer(serializers.ModelSerializer[Thread]):
    """A thread; ``forked_from``: the thread and message it was forked from, else ``null``."""

    forked_from = serializers.SerializerMethodField()

    class Meta:
        model = Thread
        fields = [
            "id",
            "owner_ref",
            "agent",
            "title",
            "active_run_id",
            "forked_from",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    @extend_schema_field(ForkedFromSerializer(allow_null=True))
    def get_forked_from(self, thread: Thread) -> dict[str, str] | None:
        if not thread.forked_from_thread_id:
            return None
        return {
            "thread_id": thread.forked_from_thread_id,
            "message_id": thread.forked_from_message_id,
        }


# A message id in a query parameter (``?from=``), checked as a body's (no NUL, at most 40
# characters).
MESSAGE_ID = serializers.CharField(max_length=40)


class ForkSerializer(serializers.Serializer[Any]):
    """``POST /agent/threads/<id>/fork``: the message to fork after (it is included)."""

    message_id = serializers.CharField(max_length=40)


class RenameSerializer(serializers.Serializer[Any]):
    """``PATCH /agent/threads/<id>``: the thread's new title."""

    title = serializers.CharField(max_length=200)


class TruncatedSerializer(serializers.Serializer[Any]):
    dropped = serializers.IntegerField(help_text="how many messages were dropped")


class ThreadDetailSerializer(ThreadSerializer):
    """A thread with its transcript (each message with its calls' approval records), its queued
    messages and the model tokens of all its runs."""

    messages = MessageSerializer(many=True, read_only=True)
    queued_messages = serializers.SerializerMethodField()
    usage = serializers.SerializerMethodField()

    class Meta(ThreadSerializer.Meta):
        fields = [*ThreadSerializer.Meta.fields, "messages", "queued_messages", "usage"]
        read_only_fields = fields

    @extend_schema_field(QueuedMessageSerializer(many=True))
    def get_queued_messages(self, thread: Thread) -> list[dict[str, Any]]:
        waiting = QueuedMessage.objects.waiting(thread.pk)
        return QueuedMessageSerializer(waiting, many=True).data  # type: ignore[return-value]

    @extend_schema_field(UsageSerializer)
    def get_usage(self, thread: Thread) -> dict[str, int]:
        return usage.of_thread(thread.pk).as_dict()


class StepSerializer(serializers.ModelSerializer[Step]):
    class Meta:
        model = Step
        fields = [
            "name",
            "status",
            "output",
            "attempts",
            "input_tokens",
            "output_tokens",
            "cached_tokens",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields


class RunSerializer(serializers.ModelSerializer[Run]):
    """A run; ``error_message`` only when ``EXPOSE_ERROR_DETAILS`` (else ``null``);
    ``dropped_at``: when a truncation or a regenerate dropped its messages (SPEC §16)."""

    error_message = serializers.SerializerMethodField()
    usage = serializers.SerializerMethodField()
    kind = serializers.CharField(
        read_only=True, help_text="`turn`, or `proposal`: an independent proposal's execution"
    )

    class Meta:
        model = Run
        fields = [
            "id",
            "thread_id",
            "agent",
            "kind",
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
            "dropped_at",
            "usage",
        ]
        read_only_fields = fields

    @extend_schema_field(UsageSerializer)
    def get_usage(self, run: Run) -> dict[str, int]:
        return usage.of_run(run).as_dict()

    def get_error_message(self, run: Run) -> str | None:
        return run.error_message if agent_settings().expose_error_details else None


class ChildRunSerializer(serializers.ModelSerializer[Run]):
    """A run this run started by delegation (SPEC §14); ``parent_tool_call_id`` is ``null`` for
    a detached one."""

    class Meta:
        model = Run
        fields = ["id", "agent", "status", "error_code", "parent_tool_call_id", "created_at"]
        read_only_fields = fields


class RunDetailSerializer(RunSerializer):
    """A run with its journal, its tool calls and its child runs."""

    steps = StepSerializer(many=True, read_only=True)
    tool_calls = ToolCallSerializer(many=True, read_only=True)
    children = serializers.SerializerMethodField()

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "steps", "tool_calls", "children"]
        read_only_fields = fields

    @extend_schema_field(ChildRunSerializer(many=True))
    def get_children(self, run: Run) -> list[dict[str, Any]]:
        children = run.child_runs.order_by("created_at")
        return ChildRunSerializer(children, many=True).data  # type: ignore[return-value]
