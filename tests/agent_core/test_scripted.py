"""The scripted demo model's grammar."""

from __future__ import annotations

from agent_core.providers import get_provider
from agent_core.providers.base import ModelMessage, ModelRequest, ModelResponse
from agent_core.providers.scripted import parse_calls
from agent_core.tools import AbortSignal


def reply(*messages: ModelMessage) -> ModelResponse:
    request = ModelRequest(
        model="scripted:demo", instructions="", messages=list(messages), tools=[]
    )
    response = ModelResponse()
    for event in get_provider("scripted:demo").stream(request, abort=AbortSignal()):
        response.add(event)
    return response


def user(text: str) -> ModelMessage:
    return ModelMessage("user", [{"type": "text", "text": text}])


def test_call_lines_become_tool_calls_in_one_step():
    response = reply(user('please\n/call lookup_order {"order_id": "A-1"}\n/call purge_cache {}'))
    assert [(c.name, c.args) for c in response.tool_calls] == [
        ("lookup_order", {"order_id": "A-1"}),
        ("purge_cache", {}),
    ]
    assert response.text == "" and response.finish_reason == "tool_calls"


def test_arguments_that_are_not_json_stay_a_string():
    assert parse_calls("/call lookup_order {oops") == [("lookup_order", "{oops")]


def test_after_tool_results_it_mentions_each_result():
    results = ModelMessage(
        "tool",
        [
            {"type": "tool_result", "tool_name": "lookup_order", "output": {"found": True}},
            {"type": "tool_result", "tool_name": "purge_cache", "output": "no", "is_error": True},
        ],
    )
    text = reply(user("/call x {}"), results).text
    assert 'lookup_order returned {"found": true}' in text
    assert "purge_cache did not succeed: no" in text


def test_keywords_and_fallback():
    assert "/call issue_refund" in reply(user("I want a refund")).text
    assert reply(user("what is the weather")).text.startswith("You said: what is the weather")
    assert reply(user("hi")).usage.output_tokens > 0
