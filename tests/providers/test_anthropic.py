"""The Anthropic provider: the real ``anthropic`` SDK against a local fake Messages API server."""

from __future__ import annotations

import threading

import pytest

from agent_core.choices import CallStatus, RunStatus
from agent_core.exceptions import ModelError
from agent_core.models import Message, Step, StreamFrame
from agent_core.providers import get_provider
from agent_core.providers.base import (
    Finish,
    ModelRequest,
    TextDelta,
    ToolCallPart,
    Usage,
)
from agent_core.tools import AbortSignal
from tests.conftest import calls_of
from tests.providers.fake_server import Reply
from tests.providers.streaming import assert_usage_recorded, model_request, stream_events
from tests.providers.wire import (
    anthropic_start,
    anthropic_text,
    anthropic_tool_calls,
    sse,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("use_anthropic")]

MODEL = "anthropic:test-model"


def request(text: str = "hi") -> ModelRequest:
    return model_request(MODEL, text)


def events(req: ModelRequest | None = None, abort: AbortSignal | None = None) -> list[object]:
    return stream_events(MODEL, req, abort)


def error(kind: str, message: str) -> dict[str, object]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def test_text_streams_in_pieces_with_usage(fake):
    fake.queue(Reply(events=anthropic_text("Hel", "lo ", "there")))
    assert events() == [
        Usage(input_tokens=13),
        TextDelta("Hel"),
        TextDelta("lo "),
        TextDelta("there"),
        Usage(output_tokens=5),
        Finish("stop"),
    ]
    [seen] = fake.requests
    assert seen.path == "/v1/messages"
    assert "sk-ant-test" in (seen.headers.get("x-api-key") or seen.headers["authorization"])
    assert seen.body["model"] == "test-model" and seen.body["stream"] is True
    assert seen.body["system"] == "Be brief." and seen.body["max_tokens"] == 4096
    assert seen.body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert seen.body["tools"][0] == {
        "name": "lookup_order",
        "description": "Look up an order.",
        "input_schema": {"type": "object", "properties": {}},
    }


def test_parallel_tool_use_blocks_are_assembled_from_json_deltas(fake):
    fake.queue(
        Reply(
            events=anthropic_tool_calls(
                ("toolu_a", "lookup_order", {"order_id": "A-1001"}),
                ("toolu_b", "lookup_order", {"order_id": "A-1002"}),
                text="Let me look.",
            )
        )
    )
    got = events()
    assert TextDelta("Let me look.") in got
    assert [e for e in got if isinstance(e, ToolCallPart)] == [
        ToolCallPart("toolu_a", "lookup_order", {"order_id": "A-1001"}),
        ToolCallPart("toolu_b", "lookup_order", {"order_id": "A-1002"}),
    ]
    assert got[-1] == Finish("tool_calls")


@pytest.mark.parametrize("status", [429, 500, 529])
def test_rate_limits_and_server_errors_are_retryable(fake, status):
    fake.queue(Reply(status=status, body=error("overloaded_error", "busy")))
    with pytest.raises(ModelError) as caught:
        events()
    assert caught.value.retryable is True and str(status) in caught.value.message
    assert len(fake.requests) == 1  # the SDK itself does not retry: the loop does


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_client_errors_are_not_retryable(fake, status):
    fake.queue(Reply(status=status, body=error("invalid_request_error", "no")))
    with pytest.raises(ModelError) as caught:
        events()
    assert caught.value.retryable is False


def test_an_error_event_mid_stream_is_retryable(fake):
    fake.queue(
        Reply(events=[anthropic_start(), sse(error("overloaded_error", "busy"), event="error")])
    )
    with pytest.raises(ModelError) as caught:
        events()
    assert caught.value.retryable is True


def test_a_malformed_chunk_is_a_retryable_error(fake):
    fake.queue(Reply(events=[anthropic_start(), "event: content_block_start\ndata: {oops\n\n"]))
    with pytest.raises(ModelError, match="malformed") as caught:
        events()
    assert caught.value.retryable is True


def test_no_key_and_no_base_url_is_a_clear_error(settings, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    settings.AGENT = {**settings.AGENT, "ANTHROPIC": {}}
    with pytest.raises(ModelError, match="ANTHROPIC_API_KEY"):
        events()


def test_abort_ends_a_read_blocked_mid_stream(fake):
    fake.queue(Reply(events=anthropic_text("Thinking")[:3], hang=True))
    abort = AbortSignal()
    stream = get_provider("anthropic:test-model").stream(request(), abort=abort)
    assert next(stream) == Usage(input_tokens=13)
    assert next(stream) == TextDelta("Thinking")
    threading.Timer(0.2, abort.set).start()
    with pytest.raises(ModelError, match="aborted") as caught:
        next(stream)
    assert caught.value.retryable is False
    assert fake.disconnected.wait(10)


# --- through the loop ----------------------------------------------------------------------------


def test_the_loop_streams_text_and_records_usage(fake, turn):
    fake.queue(Reply(events=anthropic_text("Hello ", "from ", "Claude.", cached=6)))
    run = turn("hello")
    assert run.status == RunStatus.COMPLETED
    assert Message.objects.filter(thread=run.thread).latest("seq").text == "Hello from Claude."
    texts = StreamFrame.objects.filter(run=run, kind="text").values_list("data", flat=True)
    assert "".join(d["text"] for d in texts) == "Hello from Claude."
    step = Step.objects.get(run=run, name="llm:0")
    assert_usage_recorded(run, step, {"input_tokens": 13, "output_tokens": 5, "cached_tokens": 6})


def test_the_loop_round_trips_parallel_tool_use_and_results(fake, turn):
    fake.queue(
        Reply(
            events=anthropic_tool_calls(
                ("toolu_0", "lookup_order", {"order_id": "A-1001"}),
                ("toolu_1", "lookup_order", {"order_id": "NOPE"}),
                text="Checking both.",
            )
        ),
        Reply(events=anthropic_text("One found, one not.")),
    )
    run = turn("check my orders")
    assert run.status == RunStatus.COMPLETED
    first, second = calls_of(run)
    assert first.status == second.status == CallStatus.SUCCEEDED
    assert (first.provider_call_id, second.provider_call_id) == ("toolu_0", "toolu_1")
    sent = fake.requests[1].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[1]["content"] == [
        {"type": "text", "text": "Checking both."},
        {"type": "tool_use", "id": first.pk, "name": "lookup_order", "input": first.args},
        {"type": "tool_use", "id": second.pk, "name": "lookup_order", "input": second.args},
    ]
    results = sent[2]["content"]
    assert [b["type"] for b in results] == ["tool_result", "tool_result"]
    assert [b["tool_use_id"] for b in results] == [first.pk, second.pk]
    assert "maria@example.com" in results[0]["content"] and results[0]["is_error"] is False
    assert '"found": false' in results[1]["content"]


def test_a_rejected_call_reaches_the_model_as_an_error_result(fake, turn, decide):
    from approvals import services as port
    from tests.conftest import ALICE

    fake.queue(
        Reply(events=anthropic_tool_calls(("toolu_0", "purge_cache", {"path": "/"}))),
        Reply(events=anthropic_text("Understood, not purging.")),
    )
    run = turn("purge everything")
    assert run.status == RunStatus.WAITING
    [call] = calls_of(run)
    decide(port.reject, call.pk, actor=ALICE, reason="too broad", via="test")
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    [result] = fake.requests[1].body["messages"][2]["content"]
    assert result["tool_use_id"] == call.pk and result["is_error"] is True
    assert "too broad" in result["content"]


def test_a_529_then_success_retries_the_step(fake, turn):
    fake.queue(
        Reply(status=529, body=error("overloaded_error", "overloaded")),
        Reply(events=anthropic_text("Back again.")),
    )
    run = turn("hello")
    assert run.status == RunStatus.COMPLETED and len(fake.requests) == 2
    step = Step.objects.get(run=run, name="llm:0")
    assert step.attempts == 2 and step.output["usage"]["output_tokens"] == 5


def test_a_403_fails_the_run_without_retrying(fake, turn):
    fake.queue(Reply(status=403, body=error("permission_error", "no")))
    run = turn("hello")
    assert run.status == RunStatus.FAILED and run.error_code == "model_error"
    assert len(fake.requests) == 1
