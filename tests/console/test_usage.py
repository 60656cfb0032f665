"""The metrics page shows the model tokens per actor and agent."""

from __future__ import annotations

from django.db.models import Sum
from django.urls import reverse

from agent_core.engine import usage
from agent_core.models import Run
from tests.console.conftest import actor


def test_the_metrics_show_token_usage_per_actor_and_agent(login, turn, people):
    alice = actor(people["alice"])
    first = turn('/call lookup_order {"order_id": "A-1001"}', actor=alice)
    turn("hello", actor=alice, thread_id=first.thread_id)
    response = login("otto").get(reverse("console:metrics"))
    [row] = response.context["m"].usage
    totals = Run.objects.aggregate(i=Sum("input_tokens"), o=Sum("output_tokens"))
    assert (row["actor_ref"], row["agent"]) == (alice.ref, "support")
    assert (row["input_tokens"], row["output_tokens"]) == (totals["i"], totals["o"]) != (0, 0)
    assert b"Model tokens per actor and agent" in response.content
    assert usage.of_thread(first.thread_id).as_dict() == {
        "input_tokens": totals["i"],
        "output_tokens": totals["o"],
        "cached_tokens": 0,
    }
