"""The benchmark's agents. ``bench``: its scripted model calls a read tool, then an action tool,
then answers, about the order its run's message names (``Refund B-7``). ``bench_parent``: hands
that whole cycle to ``bench`` (a delegated cycle, SPEC §14) and answers with its answer.

Zero model latency: the script answers from the transcript at once.
"""

from __future__ import annotations

from agent_core.agents import Agent
from agent_core.providers.base import ModelRequest
from agent_core.providers.scripted import Reply, register_script
from demo.tools import issue_refund, lookup_order


def asked_order(request: ModelRequest) -> str:
    """The order the run's first message asks about: its last word (``Refund B-7``)."""
    text: str = request.messages[0].parts[0]["text"]
    return text.rsplit(" ", 1)[-1]


def cycle_script(request: ModelRequest) -> Reply:
    """Step 0: look the order up; step 1: refund it; step 2: the final answer."""
    order = asked_order(request)
    results = sum(1 for m in request.messages if m.role == "tool")
    if results == 0:
        return Reply(calls=[("lookup_order", {"order_id": order})])
    if results == 1:
        return Reply(calls=[("issue_refund", {"order_id": order, "amount": "1.00"})])
    return Reply(text=f"Refunded 1.00 on order {order}.")


register_script("bench-cycle", cycle_script)

bench_agent = Agent(
    name="bench",
    instructions="Refund the order you are asked about.",
    model="scripted:bench-cycle",
    tools=(lookup_order, issue_refund),
)


def parent_script(request: ModelRequest) -> Reply:
    """Step 0: ask ``bench``; step 1: its answer is the final answer."""
    if not any(m.role == "tool" for m in request.messages):
        return Reply(calls=[("ask_bench", {"message": f"Refund {asked_order(request)}"})])
    return Reply(text="Billing says: refunded.")


register_script("bench-parent", parent_script)

bench_parent_agent = Agent(
    name="bench_parent",
    instructions="Hand the refund to bench.",
    model="scripted:bench-parent",
    delegates=("bench",),
)
