"""Shared fixtures: demo data, actors and people (``tests/factories.py``), a synchronous and a
threaded inline runner for in-process tests; ``wait_for``, for whatever runs elsewhere."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any, Protocol

import pytest
from django.contrib.auth.models import User
from django.db import connection

from agent_core.actors import Actor
from agent_core.engine import calls, leases, runs
from agent_core.engine.dispatch import get_runner, set_runner
from agent_core.models import Run, StreamFrame, ToolCall
from agent_core.runner.inline import InlineRunner
from approvals import services as port
from demo.models import Campaign, Order
from tests.factories import make_people, make_user

ALICE = Actor(ref="user:alice")
BOB = Actor(ref="user:bob")
FRAN = Actor(ref="user:fran", roles=frozenset({"finance"}))
# A turn whose model asks to refund 10.00 on A-1001: an action that waits for a person.
REFUND = '/call issue_refund {"order_id": "A-1001", "amount": 10}'
# A guard against hanging forever, not a timing assertion: every wait ends well before it.
WAIT_SECONDS = 90.0


def refund(amount: int) -> str:
    """A message that asks for a refund of ``amount`` (``REFUND`` is one of 10)."""
    return f'/call issue_refund {{"order_id": "A-1001", "amount": {amount}}}'


@pytest.fixture
def shop(db: None) -> None:
    Order.objects.create(pk="A-1001", customer_email="maria@example.com", total=Decimal("59.90"))
    Order.objects.create(pk="A-1002", customer_email="li@example.com", total=Decimal("12.50"))
    Campaign.objects.create(pk="spring-sale", subject="Spring sale", audience_size=40_000)


@pytest.fixture
def user_factory(db: None) -> Callable[..., User]:
    """``make_user(username, *roles, staff=False, **fields)``."""
    return make_user


@pytest.fixture
def people(db: None) -> dict[str, User]:
    """alice, bob, fran and felix (finance, staff), otto (operator): ``make_people``."""
    return make_people()


@pytest.fixture
def sync_runner() -> Iterator[InlineRunner]:
    """Runs are driven in the dispatching thread, right after the commit that queued them."""
    runner = InlineRunner(workers=0)
    set_runner(runner)
    yield runner
    set_runner(None)


@pytest.fixture
def threaded_runner() -> Iterator[InlineRunner]:
    """Runs are driven on the runner's own threads (for ``transaction=True`` tests)."""
    runner = InlineRunner(workers=4)
    set_runner(runner)
    yield runner
    runner.shutdown()
    set_runner(None)


def settled(run_id: str, *statuses: str) -> Callable[[], bool]:
    """For ``wait_for``: whether the run is in one of ``statuses``."""
    return lambda: Run.objects.values_list("status", flat=True).get(pk=run_id) in statuses


class _Logged(Protocol):
    def logs(self) -> str: ...


def wait_for(what: str, predicate: Callable[[], Any], logged: _Logged | None = None) -> Any:
    """Poll until ``predicate`` holds and return its value: the database, while threads or
    processes work; ``logged`` (a crash test's ``Cluster``): whose logs to show on giving up."""
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"gave up waiting for {what}\n{logged.logs() if logged else ''}")


@pytest.fixture
def turn(
    shop: None, sync_runner: InlineRunner, django_capture_on_commit_callbacks: Any
) -> Callable[..., Run]:
    """Start a turn (of the demo agent unless told another) and drive it until it parks or ends:
    the runs and tool calls of in-process tests are made as the product makes them."""

    def start(
        message: str, *, actor: Actor = ALICE, thread_id: str | None = None, agent: str = "support"
    ) -> Run:
        with django_capture_on_commit_callbacks(execute=True):
            run = runs.start_run(agent=agent, message=message, actor=actor, thread_id=thread_id)
        run.refresh_from_db()
        return run

    return start


@pytest.fixture
def decide(django_capture_on_commit_callbacks: Any) -> Callable[..., Any]:
    """Call a decision service and let the run it resumes be driven before returning."""

    def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        with django_capture_on_commit_callbacks(execute=True):
            return fn(*args, **kwargs)

    return call


def calls_of(run: Run) -> list[ToolCall]:
    return list(ToolCall.objects.filter(run=run).order_by("requested_at", "position"))


OPS_AGENTS = ["demo.agents.support_agent", "tests.approvals.agents.ops_agent"]


@pytest.fixture
def ops_turn(turn: Callable[..., Run], settings: Any) -> Callable[..., Run]:
    """Like ``turn``, for the ``ops`` test agent (preflight and never-rememberable tools)."""
    settings.AGENT = {**settings.AGENT, "AGENTS": OPS_AGENTS}
    return functools.partial(turn, agent="ops")


@pytest.fixture
def desk(turn: Callable[..., Run]) -> Callable[..., Run]:
    """Like ``turn``, for the ``desk`` test agent, which delegates (SPEC §14;
    ``tests/durable/agents.py``)."""
    return functools.partial(turn, agent="desk")


def frame_kinds(run: Run) -> list[str]:
    return list(StreamFrame.objects.filter(run=run).order_by("seq").values_list("kind", flat=True))


class _DeadWorker:
    """A runner whose worker is gone: what it is handed is never driven."""

    def dispatch(self, run_id: str, kind: Any = None) -> None:
        return None


def leave_in_doubt(call_id: str, approver: Actor) -> None:
    """Approve a pending call while no worker drives it, then let the loop's own services put it
    in doubt, as a worker that claimed it and died would have left it."""
    previous = get_runner()
    set_runner(_DeadWorker())
    try:
        port.approve(call_id, actor=approver)
    finally:
        set_runner(previous)
    run_id = ToolCall.objects.values_list("run_id", flat=True).get(pk=call_id)
    lease = leases.acquire(run_id, "worker-that-dies")
    assert lease is not None
    calls.claim_call(lease, call_id)
    calls.mark_in_doubt(lease, call_id)
    runs.block_on_doubt(lease, call_id)


def at_once(count: int, job: Callable[[], Any]) -> list[Any]:
    """``job`` run by ``count`` threads released together, as several sweepers or beat processes
    would run it, each on its own connection; what each returned."""
    barrier = threading.Barrier(count)
    results: list[Any] = []

    def one() -> None:
        try:
            barrier.wait()
            results.append(job())
        finally:
            connection.close()

    threads = [threading.Thread(target=one) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results
