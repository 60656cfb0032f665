"""Console fixtures: policies (refunds to finance; the demo's), a pending refund, logins as
``people``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import override_settings

from agent_core.actors import Actor, actor_for_user
from agent_core.models import Run, ToolCall

FINANCE_POLICY = "tests.console.policy.FinancePolicy"
DEMO_POLICY = "demo.policy.DemoPolicy"
REFUND = '/call issue_refund {"order_id": "A-1001", "amount": 25}'


def actor(user: User) -> Actor:
    return actor_for_user(user)


@pytest.fixture
def finance_policy() -> Iterator[None]:
    with override_settings(AGENT={**settings.AGENT, "APPROVAL_POLICY": FINANCE_POLICY}):
        yield


@pytest.fixture
def demo_policy() -> Iterator[None]:
    """The policy ``make demo`` runs: refunds need finance, campaigns marketing, purges the
    requester."""
    with override_settings(AGENT={**settings.AGENT, "APPROVAL_POLICY": DEMO_POLICY}):
        yield


@pytest.fixture
def refund(turn: Callable[..., Run], people: dict[str, User], finance_policy: None) -> ToolCall:
    """A pending refund that waits on finance, requested by alice."""
    run = turn(REFUND, actor=actor(people["alice"]))
    return ToolCall.objects.get(run=run, tool_name="issue_refund")


@pytest.fixture
def login(client: Any, people: dict[str, User]) -> Callable[[str], Any]:
    def as_user(name: str) -> Any:
        client.force_login(people[name])
        return client

    return as_user
