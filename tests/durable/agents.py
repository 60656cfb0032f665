"""Test-only agents the crash tests' worker processes import (listed in the test settings).

``crash`` has the demo tools plus ``notify_customer``, an ``idempotent`` tool whose provider
dedupes on the idempotency key, ``purge_strict``, a plain tool that asks afresh for every
attempt, and ``read_vault``, a read that runs only on the ``agent.vault`` queue. ``slow``
streams a little text and then stalls for ``AIRLOCK_TEST_SLOW_MODEL`` seconds, so a test can
kill a worker in the middle of a model step. ``desk`` and ``relay`` delegate (compositions).
``looper`` has small per-run limits and a model that wanders or loops (SPEC §16).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

from agent_core.agents import Agent, Delegate
from agent_core.compositions import Parallel, Pipeline
from agent_core.exceptions import ModelError
from agent_core.providers.base import ModelEvent, ModelRequest, TextDelta
from agent_core.providers.scripted import Reply, ScriptedProvider, register_script
from agent_core.tools import AbortSignal, ToolContext, tool
from demo.models import CachePurge, MailerSend
from demo.tools import issue_refund, lookup_order, purge_cache, send_campaign


@tool(kind="action", idempotent=True)
def notify_customer(ctx: ToolContext, order_id: str) -> dict[str, Any]:
    """Text the customer about their order (the SMS provider dedupes on the idempotency key)."""
    sent, _ = MailerSend.objects.get_or_create(
        idempotency_key=ctx.idempotency_key, defaults={"campaign_id": order_id, "recipients": 1}
    )
    time.sleep(float(os.environ.get("AIRLOCK_TEST_NOTIFY_DELAY", "0")))
    return {"send_id": sent.pk}


@tool(kind="action", approval_scope="attempt")
def purge_strict(ctx: ToolContext, path: str) -> dict[str, Any]:
    """Purge a path; every attempt needs its own approval."""
    purge = CachePurge.objects.create(path=path, tool_call_id=ctx.tool_call_id)
    time.sleep(float(os.environ.get("DEMO_PURGE_DELAY", "0")))
    return {"purged": path, "purge_id": purge.pk}


@tool(kind="read", queue="agent.vault")
def read_vault(ctx: ToolContext, key: str) -> dict[str, Any]:
    """Read a secret only the workers on ``agent.vault`` hold; says which process read it."""
    return {"key": key, "pid": os.getpid()}


_TOOLS = (
    lookup_order,
    issue_refund,
    send_campaign,
    purge_cache,
    notify_customer,
    purge_strict,
    read_vault,
)

crash_agent = Agent(name="crash", instructions="Crash tests.", tools=_TOOLS)
slow_agent = Agent(name="slow", instructions="Crash tests.", model="slow:demo", tools=_TOOLS)


class SlowProvider(ScriptedProvider):
    """The scripted model, after streaming "thinking…" and stalling (``slow:<script>``); with
    ``AIRLOCK_TEST_SLOW_AFTER_TOOLS``, only once the request carries tool results."""

    def stream(self, request: ModelRequest, *, abort: AbortSignal) -> Iterator[ModelEvent]:
        yield TextDelta("thinking ")
        time.sleep(0.1)  # past STREAM_FRAME_FLUSH_MS: the next delta flushes a text frame
        yield TextDelta("hard ")
        results = any(m.role == "tool" for m in request.messages)
        if results or not os.environ.get("AIRLOCK_TEST_SLOW_AFTER_TOOLS"):
            time.sleep(float(os.environ.get("AIRLOCK_TEST_SLOW_MODEL", "0")))
        yield from super().stream(request, abort=abort)


class FlakyProvider(ScriptedProvider):
    """The scripted model, failing retryably on its first ``AIRLOCK_TEST_FLAKY`` requests in this
    process (``flaky:<script>``)."""

    failures = 0

    def stream(self, request: ModelRequest, *, abort: AbortSignal) -> Iterator[ModelEvent]:
        if FlakyProvider.failures < int(os.environ.get("AIRLOCK_TEST_FLAKY", "0")):
            FlakyProvider.failures += 1
            raise ModelError("503 from the provider", retryable=True)
        yield from super().stream(request, abort=abort)


flaky_agent = Agent(name="flaky", instructions="Crash tests.", model="flaky:demo", tools=_TOOLS)


# Compositions (SPEC §14): ``desk`` hands work to ``billing`` (the demo's) awaited, gated and
# detached, and to ``relay``, which hands it on to ``billing`` or back to ``desk`` (a cycle).
desk_agent = Agent(
    name="desk",
    instructions="Composition tests.",
    tools=_TOOLS,
    delegates=(
        "billing",
        "relay",
        Delegate("billing", kind="action", name="ask_billing_gated"),
        Delegate("billing", detached=True),
        "review",
        "review_by_relay",
        "chain",
        "slow",
    ),
)
relay_agent = Agent(
    name="relay", instructions="Composition tests.", tools=_TOOLS, delegates=("billing", "desk")
)

# Two reviewers, as branches of ``review`` (merged by a function), of ``review_by_relay`` (merged
# by the ``relay`` agent) and as the steps of the pipeline ``chain``.
lawyer_agent = Agent(name="lawyer", instructions="Composition tests.", tools=_TOOLS)
designer_agent = Agent(name="designer", instructions="Composition tests.", tools=_TOOLS)


def merge_reviews(answers: dict[str, str]) -> str:
    """Both reviewers' answers, in branch order: what ``review`` answers (after
    ``AIRLOCK_TEST_MERGE_DELAY`` seconds, so a test can kill a worker while it merges)."""
    time.sleep(float(os.environ.get("AIRLOCK_TEST_MERGE_DELAY", "0")))
    return " | ".join(f"{branch}: {answer}" for branch, answer in answers.items())


review_agent = Parallel(name="review", branches=("lawyer", "designer"), merge=merge_reviews)
review_by_relay_agent = Parallel(
    name="review_by_relay", branches=("lawyer", "designer"), merge="relay"
)
chain_agent = Pipeline(name="chain", steps=("lawyer", "designer"))


def looper_script(request: ModelRequest) -> Reply:
    """``wander <n>``: each step looks up ``n`` orders it has not looked up before; ``loop``:
    each step looks up A-1001 again, until told it loops (``loop, but obey``: then it answers)."""
    said = request.messages[0].parts[0]["text"]
    results = [p for m in request.messages if m.role == "tool" for p in m.parts]
    if said.startswith("wander"):
        step = len([m for m in request.messages if m.role == "tool"])
        width = int(said.split()[1])
        return Reply(calls=[("lookup_order", {"order_id": f"X-{step}-{i}"}) for i in range(width)])
    told = results and isinstance(results[-1]["output"], dict) and "note" in results[-1]["output"]
    if told and "obey" in said:
        return Reply(text="I was going round in circles; A-1001 is as I said.")
    return Reply(calls=[("lookup_order", {"order_id": "A-1001"})])


register_script("looper", looper_script)
looper_agent = Agent(
    name="looper",
    instructions="Limit tests.",
    model="scripted:looper",
    tools=(lookup_order,),
    max_steps_per_run=4,
    max_tool_calls_per_run=6,
    tool_loop_limit=3,
)
