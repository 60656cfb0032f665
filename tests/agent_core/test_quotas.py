"""Quotas in process: concurrent runs, per-agent limits, the policy hook, the signal, a budget."""

from __future__ import annotations

from typing import Any

import pytest

from agent_core import quotas, signals
from agent_core.actors import Actor
from agent_core.choices import RunStatus
from agent_core.conversation import turns
from agent_core.engine import usage
from agent_core.exceptions import QueueFull, QuotaExceeded
from agent_core.models import QueuedMessage, Run
from tests.conftest import ALICE, BOB, frame_kinds

LOOKUP = '/call lookup_order {"order_id": "A-1001"}'


@pytest.fixture
def limits(settings: Any):
    def set_quotas(**quotas: Any) -> None:
        settings.AGENT = {**settings.AGENT, "QUOTAS": quotas}

    return set_quotas


@pytest.fixture
def sent() -> Any:
    received: list[dict[str, Any]] = []

    def receiver(sender: Any, **kwargs: Any) -> None:
        received.append(kwargs)

    signals.quota_exceeded.connect(receiver)
    yield received
    signals.quota_exceeded.disconnect(receiver)


def test_concurrent_runs_count_active_runs_but_not_queued_messages(turn, limits, sent):
    limits(CONCURRENT_RUNS=1)
    parked = turn('/call issue_refund {"order_id": "A-1001", "amount": 10}')
    assert parked.status == RunStatus.WAITING
    with pytest.raises(QuotaExceeded) as refused:
        turns.start_turn(agent="support", message="hello", actor=ALICE)
    assert refused.value.retry_after == quotas.CONCURRENT_RETRY_SECONDS
    assert sent == [
        {
            "run": None,
            "actor_ref": ALICE.ref,
            "reason": "concurrent_runs",
            "signal": signals.quota_exceeded,
        }
    ]
    queued = turns.start_turn(
        agent="support",
        message="later",
        actor=ALICE,
        thread_id=parked.thread_id,
        mode=turns.Mode.QUEUE,
    )
    assert isinstance(queued, turns.Queued) and queued.position == 1
    assert isinstance(turns.start_turn(agent="support", message="hi", actor=BOB), Run)


def test_a_per_agent_limit_leaves_other_agents_alone(turn, limits, settings):
    limits(PER_AGENT={"support": {"RUNS_PER_MINUTE": 1}})
    turn("hello")
    with pytest.raises(QuotaExceeded):
        turns.start_turn(agent="support", message="hello", actor=ALICE)
    settings.AGENT = {
        **settings.AGENT,
        "AGENTS": [*settings.AGENT["AGENTS"], "tests.durable.agents.crash_agent"],
    }
    assert isinstance(turns.start_turn(agent="crash", message="hello", actor=ALICE), Run)


class WeekendPolicy(quotas.SettingsQuotaPolicy):
    """A custom rule: Bob may start nothing."""

    def check_start(self, actor: Actor, agent: str, *, starts_now: bool) -> quotas.Exceeded | None:
        if actor.ref == BOB.ref:
            return quotas.Exceeded("no_bob", "Bob rests today", 3600)
        return super().check_start(actor, agent, starts_now=starts_now)


def test_the_policy_hook_adds_rules(turn, settings):
    path = f"{__name__}.WeekendPolicy"
    settings.AGENT = {**settings.AGENT, "QUOTA_POLICY": path}
    with pytest.raises(QuotaExceeded) as refused:
        turns.start_turn(agent="support", message="hello", actor=BOB)
    assert refused.value.retry_after == 3600 and "Bob rests" in refused.value.message
    assert turn("hello").status == RunStatus.COMPLETED


def test_a_run_over_its_token_budget_stops_before_its_next_model_step(turn, limits, sent):
    limits(TOKENS_PER_DAY=5)
    run = turn(LOOKUP)
    assert run.status == RunStatus.FAILED and run.error_code == "quota_exceeded"
    kinds = frame_kinds(run)
    assert kinds[-2:] == ["quota-exceeded", "finish"] and "tool-output" in kinds
    assert list(run.steps.filter(name__startswith="llm:").values_list("name", flat=True)) == [
        "llm:0"
    ]
    assert [s["reason"] for s in sent] == ["tokens_per_day"] and sent[0]["run"].pk == run.pk
    # The next turn tells the model what came of the call the stopped run made.
    assert run.messages.filter(role="tool").exists()
    spent = usage.of_actor(ALICE.ref, since=run.created_at)
    assert spent.total == run.input_tokens + run.output_tokens > 5


def _queue(thread_id: str) -> turns.Run | turns.Queued:
    return turns.start_turn(
        agent="support", message="later", actor=ALICE, thread_id=thread_id, mode=turns.Mode.QUEUE
    )


def test_queued_messages_count_against_runs_per_minute(turn, limits):
    """Issue #35: a queued message was checked against the runs already started only, so 20
    messages queued on a busy thread all passed ``RUNS_PER_MINUTE=3``."""
    limits(RUNS_PER_MINUTE=3)
    parked = turn('/call issue_refund {"order_id": "A-1001", "amount": 10}')
    assert isinstance(_queue(parked.thread_id), turns.Queued)
    assert isinstance(_queue(parked.thread_id), turns.Queued)  # 1 run + 2 queued: 3
    with pytest.raises(QuotaExceeded) as refused:
        _queue(parked.thread_id)
    assert "3 runs a minute" in refused.value.message


def test_a_threads_queue_holds_at_most_max_queued_turns(turn, settings):
    settings.AGENT = {**settings.AGENT, "MAX_QUEUED_TURNS": 2}
    parked = turn('/call issue_refund {"order_id": "A-1001", "amount": 10}')
    positions = [_queue(parked.thread_id).position for _ in range(2)]  # type: ignore[union-attr]
    assert positions == [1, 2]
    with pytest.raises(QueueFull) as refused:
        _queue(parked.thread_id)
    assert (refused.value.code, refused.value.status_code) == ("queue_full", 429)
    assert refused.value.retry_after >= 1
    assert QueuedMessage.objects.filter(thread_id=parked.thread_id).count() == 2
