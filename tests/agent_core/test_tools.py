"""Declaring tools: schema from type hints, description from the docstring, validation."""

from __future__ import annotations

import pydantic
import pytest

from agent_core.actors import Actor
from agent_core.tools import ToolContext, args_digest, tool
from demo.tools import ask_user, issue_refund, lookup_order


def test_schema_and_description_come_from_the_function():
    assert lookup_order.description.startswith("Look up an order by id")
    schema = lookup_order.parameters_schema
    assert schema["required"] == ["order_id"]
    assert schema["properties"]["order_id"]["type"] == "string"
    assert issue_refund.kind == "action" and issue_refund.atomic


def test_args_are_validated_and_extra_keys_refused():
    assert issue_refund.validate_args({"order_id": "A", "amount": "2.50"})["amount"] == "2.50"
    with pytest.raises(pydantic.ValidationError):
        issue_refund.validate_args({"order_id": "A", "amount": 0})
    with pytest.raises(pydantic.ValidationError):
        lookup_order.validate_args({"order_id": "A", "sneaky": True})


def test_a_human_tool_carries_its_answer_schema():
    assert ask_user.kind == "human"
    assert ask_user.answer_schema is not None
    assert ask_user.answer_schema["required"] == ["answer"]


def test_the_args_digest_is_canonical():
    assert args_digest("t", {"a": 1, "b": 2}) == args_digest("t", {"b": 2, "a": 1})
    assert args_digest("t", {"a": 1}) != args_digest("u", {"a": 1})


def test_variadic_parameters_cannot_be_described():
    def bad(ctx: ToolContext, *args: int) -> None:
        """Bad."""

    with pytest.raises(TypeError):
        tool(bad)


def _ctx() -> ToolContext:
    return ToolContext(
        run_id="run_1",
        thread_id="thr_1",
        tool_call_id="tc_1",
        actor=Actor(ref="user:1"),
        idempotency_key="airlock-tc_1",
    )


def test_a_summary_is_one_line_and_never_breaks_a_run(caplog):
    @tool(kind="action", summary=lambda ctx, args: f"Purge\n  {args['path']}  " + "x" * 400)
    def purge(ctx: ToolContext, path: str) -> None:
        """Purge."""

    said = purge.summarize(_ctx(), {"path": "/a"})
    assert said.startswith("Purge /a x") and len(said) == 300 and said.endswith("…")

    @tool(kind="action", summary=lambda ctx, args: args["missing"])
    def broken(ctx: ToolContext) -> None:
        """Broken."""

    assert broken.summarize(_ctx(), {}) == ""  # the decider reads the raw arguments instead
    assert "the summary of tool broken failed" in caplog.text
    assert lookup_order.summarize(_ctx(), {"order_id": "A"}) == ""  # none declared
