"""Where the durable runner runs each step: ``queues.queue_of`` (SPEC §6, §12)."""

from __future__ import annotations

from django.test import override_settings

from agent_core.agents import Agent
from agent_core.runner.queues import queue_of
from agent_core.tools import ToolContext, tool
from demo.tools import ask_user, issue_refund, lookup_order, purge_cache


@tool(kind="action", queue="payments")
def charge_card(ctx: ToolContext, amount: int) -> int:
    """Charge the card on file."""
    return amount


agent = Agent(
    name="routing", tools=(lookup_order, issue_refund, purge_cache, charge_card, ask_user)
)


def test_model_steps_reads_atomic_and_human_tools_stay_where_the_model_step_runs():
    assert queue_of(agent) == "agent.llm"
    assert {queue_of(agent, t) for t in ("lookup_order", "issue_refund", "ask_user")} == {
        "agent.llm"
    }


def test_an_action_with_effects_outside_the_database_goes_to_the_tool_queue():
    assert queue_of(agent, "purge_cache") == "agent.tool"


def test_a_tool_that_names_a_queue_runs_there():
    assert queue_of(agent, "charge_card") == "payments"


def test_an_unknown_tool_fails_where_the_run_is():
    assert queue_of(agent, "no_such_tool") == "agent.llm"


@override_settings(AGENT={"MODEL_QUEUE": "gpu", "TOOL_QUEUE": "effects"})
def test_the_queue_settings_route_the_defaults():
    assert queue_of(agent) == "gpu" and queue_of(agent, "lookup_order") == "gpu"
    assert queue_of(agent, "purge_cache") == "effects"
    assert queue_of(agent, "charge_card") == "payments"
