"""Approvals as an MCP server (SPEC §18), with the SDK's own client: over streamable HTTP against
``/agent/mcp`` on a real daphne (token auth), and over stdio against ``manage.py airlock_mcp``.
An approver lists, reads and decides (``decided_via: "mcp"``); what they may not see is neither
listed nor found."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from decimal import Decimal
from typing import Any

import httpx2
import pytest
from django.contrib.auth.models import User
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from rest_framework.authtoken.models import Token

from agent_core.actors import actor_for_user
from agent_core.choices import CallStatus, RunStatus
from agent_core.engine import runs
from agent_core.models import Run, ToolCall
from approvals.models import DecisionAttempt
from demo.models import Refund
from tests.conftest import settled, wait_for
from tests.factories import make_user
from tests.processes import MANAGE, django_env

pytestmark = pytest.mark.slow
PURGE = '/call purge_cache {"path": "/products"}'


def waiting_call(owner: User) -> ToolCall:
    """A call of ``owner``'s run that waits on their approval (the requester's)."""
    run = runs.start_run(agent="support", message=PURGE, actor=actor_for_user(owner))
    wait_for("the run to park", settled(run.pk, RunStatus.WAITING))
    return ToolCall.objects.get(run=run)


@asynccontextmanager
async def over_http(url: str, token: str | None) -> AsyncIterator[Any]:
    headers = {"Authorization": f"Token {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            yield streams


def session(server: Any, work: Callable[[Client], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        async with Client(server) as client:
            return await work(client)

    return asyncio.run(main())


async def tool(client: Client, name: str, **args: Any) -> tuple[bool, Any]:
    """(is_error, the structured result or the error's text)."""
    result = await client.call_tool(name, args)
    if result.is_error:
        return True, " ".join(b.text for b in result.content if b.type == "text")
    return False, result.structured_content


def decide_as(server_of: Callable[[User], Any], sync_runner: Any) -> None:
    alice, bob = make_user("alice"), make_user("bob")
    call = waiting_call(alice)

    async def as_bob(client: Client) -> None:
        assert await tool(client, "list_pending") == (False, {"result": []})
        failed, said = await tool(client, "get_call", tool_call_id=call.pk)
        assert failed and said.endswith(f"not_found: no tool call {call.pk}")
        failed, said = await tool(client, "approve", tool_call_id=call.pk)
        assert failed and "not_found" in said

    session(server_of(bob), as_bob)

    async def as_alice(client: Client) -> None:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert {"list_pending", "get_call", "approve", "reject", "extend"} <= set(tools)
        assert tools["list_pending"].annotations.read_only_hint is True  # type: ignore[union-attr]
        _, listed = await tool(client, "list_pending")
        assert [c["tool_call_id"] for c in listed["result"]] == [call.pk]
        _, shown = await tool(client, "get_call", tool_call_id=call.pk)
        assert (shown["tool_name"], shown["args"]) == ("purge_cache", {"path": "/products"})
        assert await tool(client, "approve", tool_call_id=call.pk) == (
            False,
            {"tool_call_id": call.pk, "status": "approved", "outcome": "applied"},
        )

    session(server_of(alice), as_alice)
    wait_for("the run to finish", settled(call.run_id, RunStatus.COMPLETED))
    call.refresh_from_db()
    assert (call.status, call.decided_via) == (CallStatus.SUCCEEDED, "mcp")
    assert call.decided_by_ref == actor_for_user(alice).ref
    vias = set(DecisionAttempt.objects.filter(tool_call_id=call.pk).values_list("via", flat=True))
    assert vias == {"mcp"}  # bob's refused attempt is audited too
    assert Run.objects.get(pk=call.run_id).status == RunStatus.COMPLETED


def test_an_approver_decides_over_http_with_a_token(servers, sync_runner):
    url = f"{servers[0].url}/agent/mcp"

    def server_of(person: User) -> Any:
        return over_http(url, Token.objects.create(user=person).key)

    decide_as(server_of, sync_runner)


def test_an_approver_rejects_with_a_reason_and_extends_over_http(servers, sync_runner):
    alice = make_user("alice")
    call = waiting_call(alice)
    token = Token.objects.create(user=alice).key

    async def as_alice(client: Client) -> None:
        failed, said = await tool(client, "extend", tool_call_id=call.pk, minutes=30)
        assert failed and "this request has no deadline to extend" in said
        assert await tool(client, "reject", tool_call_id=call.pk, reason="not on a Friday") == (
            False,
            {"tool_call_id": call.pk, "status": "rejected", "outcome": "applied"},
        )

    session(over_http(f"{servers[0].url}/agent/mcp", token), as_alice)
    wait_for("the run to finish", settled(call.run_id, RunStatus.COMPLETED))
    call.refresh_from_db()
    assert (call.status, call.reason, call.decided_via) == (
        CallStatus.REJECTED,
        "not on a Friday",
        "mcp",
    )


@pytest.mark.parametrize("authorization", [None, "Token not-a-token", "Basic eDp5"])
def test_no_valid_token_is_refused(a, authorization):
    headers = {"Authorization": authorization} if authorization else {}
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    response = a.post("/agent/mcp", json=ping, headers=headers)
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"


def over_stdio(person: User) -> StdioServerParameters:
    args = [*MANAGE[1:], "airlock_mcp", "--as", person.username]
    return StdioServerParameters(command=sys.executable, args=args, env=django_env())


def test_an_approver_decides_over_stdio(servers, sync_runner):
    decide_as(over_stdio, sync_runner)


REFUND = "support__issue_refund"
ARGS = {"order_id": "A-1001", "amount": "10.00"}


def test_a_confirmed_tool_previews_then_commits_once_over_stdio(shop):
    alice, bob = make_user("alice"), make_user("bob")

    async def preview(client: Client) -> tuple[Any, tuple[bool, Any]]:
        [found] = [t for t in (await client.list_tools()).tools if t.name == REFUND]
        return found.annotations, await tool(client, REFUND, args=ARGS)

    hints, (failed, shown) = session(over_stdio(alice), preview)
    assert (hints.destructive_hint, hints.read_only_hint) == (True, False)
    assert not failed and shown["status"] == "preview"
    assert shown["preview"].startswith("Refund 10.00 on order A-1001")
    assert not Refund.objects.exists()  # a preview runs nothing
    token = shown["confirm_token"]

    def commit(args: dict[str, Any]) -> Callable[[Client], Awaitable[tuple[bool, Any]]]:
        return lambda client: tool(client, REFUND, args=args, confirm_token=token)

    failed, said = session(over_stdio(bob), commit(ARGS))
    assert failed and "confirm_token_mismatch" in said and "another actor" in said
    failed, said = session(over_stdio(alice), commit({**ARGS, "amount": "50.00"}))
    assert failed and "confirm_token_mismatch" in said and "other arguments" in said
    assert not Refund.objects.exists()

    async def commit_twice(client: Client) -> list[tuple[bool, Any]]:
        return [await commit(ARGS)(client), await commit(ARGS)(client)]

    (failed, done), replay = session(over_stdio(alice), commit_twice)
    [made] = Refund.objects.all()  # exactly once
    assert not failed and done["status"] == "committed"
    assert done["result"]["refund_id"] == made.pk and made.amount == Decimal("10.00")
    assert replay[0] and "confirm_token_used" in replay[1]
