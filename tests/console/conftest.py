"""Console fixtures: policies (refunds to finance; the demo's), a pending refund, logins as
``people``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import override_settings
from django.urls import reverse

from agent_core import ids
from agent_core.actors import Actor, actor_for_user
from agent_core.models import Run, ToolCall

FINANCE_POLICY = "tests.console.policy.FinancePolicy"
DEMO_POLICY = "demo.policy.DemoPolicy"
REFUND = '/call issue_refund {"order_id": "A-1001", "amount": 25}'


def actor(user: User) -> Actor:
    return actor_for_user(user)


def card_html(client: Any, call: ToolCall) -> str:
    """The call's full card, as a row of the inbox opens it."""
    response = client.get(reverse("console:call", args=[call.pk]), HTTP_X_CONSOLE_FRAGMENT="1")
    assert response.status_code == 200
    return str(response.content.decode())


def copies_of(call: ToolCall, n: int) -> list[ToolCall]:
    """``n`` more pending calls like ``call``, a second apart, each with its own summary
    ("Refund <i>.00 …"): rows to page through without starting ``n`` runs."""
    copies = []
    for i in range(n):
        copy = ToolCall.objects.get(pk=call.pk)
        copy.pk, copy.provider_call_id, copy.position = ids.tool_call_id(), f"c{i}", i + 1
        copy.summary = f"Refund {i + 1}.00 on order A-1001 — Maria, order total 59.90"
        copies.append(copy)
    made = ToolCall.objects.bulk_create(copies)
    for i, copy in enumerate(made):
        at = call.requested_at + timedelta(seconds=i + 1)
        ToolCall.objects.filter(pk=copy.pk).update(requested_at=at)
    return made


def listed(response: Any) -> list[str]:
    """The ids of the calls on an inbox page, in order."""
    return [row["id"] for row in response.context["listing"].rows]


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
