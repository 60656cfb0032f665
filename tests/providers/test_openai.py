"""The OpenAI provider: the real ``openai`` SDK against a local fake chat completions server."""

from __future__ import annotations

import json
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
from tests.providers.wire import openai_chunk, openai_text, openai_tool_calls

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("use_openai")]

MODEL = "openai:test-model"


def request(text: str = "hi") -> ModelRequest:
    return model_request(MODEL, text)


def events(req: ModelRequest | None = None, abort: AbortSignal | None = None) -> list[object]:
    return stream_events(MODEL, req, abort)


def test_text_streams_in_pieces_with_usage(fake):
    fake.queue(Reply(events=openai_text("Hel", "lo ", "there")))
    assert events() == [
        TextDelta("Hel"),
        TextDelta("lo "),
        TextDelta("there"),
        Usage(11, 7),
        Finish("stop"),
    ]
    [seen] = fake.requests
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["authorization"] == "Bearer sk-test"
    assert seen.body["model"] == "test-model" and seen.body["stream"] is True
    assert seen.body["stream_options"] == {"include_usage": True}
    assert seen.body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]
    assert seen.body["tools"][0]["function"]["name"] == "lookup_order"


def test_parallel_tool_calls_are_assembled_from_fragments(fake):
    fake.queue(
        Reply(
            events=openai_tool_calls(
                ("call_a", "lookup_order", {"order_id": "A-1001"}),
                ("call_b", "lookup_order", {"order_id": "A-1002"}),
            )
        )
    )
    got = events()
    assert [e for e in got if isinstance(e, ToolCallPart)] == [
        ToolCallPart("call_a", "lookup_order", {"order_id": "A-1001"}),
        ToolCallPart("call_b", "lookup_order", {"order_id": "A-1002"}),
    ]
    assert Usage(20, 9) in got and got[-1] == Finish("tool_calls")


@pytest.mark.parametrize(("status", "retryable"), [(429, True), (500, True), (503, True)])
def test_rate_limits_and_server_errors_are_retryable(fake, status, retryable):
    fake.queue(Reply(status=status, body={"error": {"message": "busy", "type": "x"}}))
    with pytest.raises(ModelError) as caught:
        events()
    assert caught.value.retryable is retryable and str(status) in caught.value.message
    assert len(fake.requests) == 1  # the SDK itself does not retry: the loop does


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_client_errors_are_not_retryable(fake, status):
    fake.queue(Reply(status=status, body={"error": {"message": "no", "type": "x"}}))
    with pytest.raises(ModelError) as caught:
        events()
    assert caught.value.retryable is False


def test_a_malformed_chunk_is_a_retryable_error(fake):
    fake.queue(Reply(events=[openai_chunk({"content": "Hi"}), "data: {not json\n\n"]))
    with pytest.raises(ModelError, match="malformed") as caught:
        events()
    assert caught.value.retryable is True


def test_an_unreachable_server_is_retryable(settings, fake):
    settings.AGENT = {**settings.AGENT, "OPENAI": {"BASE_URL": "http://127.0.0.1:9/v1"}}
    with pytest.raises(ModelError, match="unreachable") as caught:
        events()
    assert caught.value.retryable is True


def test_no_key_and_no_base_url_is_a_clear_error(settings, monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    settings.AGENT = {**settings.AGENT, "OPENAI": {}}
    with pytest.raises(ModelError, match="OPENAI_API_KEY") as caught:
        events()
    assert caught.value.retryable is False


def test_base_url_and_key_fall_back_to_the_environment(settings, fake, monkeypatch):
    settings.AGENT = {**settings.AGENT, "OPENAI": {}}
    monkeypatch.setenv("OPENAI_BASE_URL", f"{fake.url}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    fake.queue(Reply(events=openai_text("ok")))
    assert TextDelta("ok") in events()
    assert fake.requests[0].headers["authorization"] == "Bearer sk-from-env"


def test_abort_ends_a_read_blocked_mid_stream(fake):
    fake.queue(Reply(events=[openai_chunk({"content": "Thinking"})], hang=True))
    abort = AbortSignal()
    stream = get_provider("openai:test-model").stream(request(), abort=abort)
    assert next(stream) == TextDelta("Thinking")
    # The server now says nothing; only closing the response can end the blocked read.
    threading.Timer(0.2, abort.set).start()
    with pytest.raises(ModelError, match="aborted") as caught:
        next(stream)
    assert caught.value.retryable is False
    assert fake.disconnected.wait(10)


# --- through the loop ----------------------------------------------------------------------------


def test_the_loop_streams_text_and_records_usage(fake, turn):
    fake.queue(Reply(events=openai_text("Hello ", "from ", "the fake.", usage=(11, 7, 4))))
    run = turn("hello")
    assert run.status == RunStatus.COMPLETED
    answer = Message.objects.filter(thread=run.thread).latest("seq")
    assert answer.text == "Hello from the fake."
    texts = StreamFrame.objects.filter(run=run, kind="text").values_list("data", flat=True)
    assert "".join(d["text"] for d in texts) == "Hello from the fake."
    step = Step.objects.get(run=run, name="llm:0")
    assert_usage_recorded(run, step, {"input_tokens": 11, "output_tokens": 7, "cached_tokens": 4})


def test_the_loop_round_trips_parallel_tool_calls_and_results(fake, turn):
    fake.queue(
        Reply(
            events=openai_tool_calls(
                ("call_0", "lookup_order", {"order_id": "A-1001"}),
                ("call_1", "lookup_order", {"order_id": "A-1002"}),
                text="Looking.",
            )
        ),
        Reply(events=openai_text("Both orders are delivered.")),
    )
    run = turn("where are my orders?")
    assert run.status == RunStatus.COMPLETED
    first, second = calls_of(run)
    assert first.status == second.status == CallStatus.SUCCEEDED
    assert (first.provider_call_id, second.provider_call_id) == ("call_0", "call_1")
    assert first.pk.startswith("tc_") and second.pk.startswith("tc_")
    sent = fake.requests[1].body["messages"]
    assistant = sent[2]
    assert assistant["role"] == "assistant" and assistant["content"] == "Looking."
    assert [c["id"] for c in assistant["tool_calls"]] == [first.pk, second.pk]
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"order_id": "A-1001"}
    results = sent[3:]
    assert [m["role"] for m in results] == ["tool", "tool"]
    assert [m["tool_call_id"] for m in results] == [first.pk, second.pk]
    assert json.loads(results[0]["content"])["customer_email"] == "maria@example.com"
    assert Message.objects.filter(thread=run.thread).latest("seq").text == (
        "Both orders are delivered."
    )


def test_an_action_call_from_the_model_waits_for_approval(fake, turn):
    fake.queue(Reply(events=openai_tool_calls(("c", "purge_cache", {"path": "/products"}))))
    run = turn("purge the products page")
    assert run.status == RunStatus.WAITING
    [call] = calls_of(run)
    assert call.status == CallStatus.PENDING_APPROVAL and call.args == {"path": "/products"}


def test_a_429_then_success_retries_the_step(fake, turn):
    fake.queue(
        Reply(status=429, body={"error": {"message": "slow down", "type": "rate_limit"}}),
        Reply(events=openai_text("Second time lucky.")),
    )
    run = turn("hello")
    assert run.status == RunStatus.COMPLETED
    assert len(fake.requests) == 2
    step = Step.objects.get(run=run, name="llm:0")
    assert step.attempts == 2 and step.output["usage"]["output_tokens"] == 7


def test_a_401_fails_the_run_without_retrying(fake, turn):
    fake.queue(Reply(status=401, body={"error": {"message": "bad key", "type": "auth"}}))
    run = turn("hello")
    assert run.status == RunStatus.FAILED and run.error_code == "model_error"
    assert len(fake.requests) == 1
