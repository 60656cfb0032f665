"""Live updates: the console's WebSocket, fed by the core's signals and the run's frames."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser
from django.test import override_settings
from django.urls import reverse

from agent_core.asgi import websocket_application
from agent_core.engine import runs
from agent_core.models import ToolCall
from approvals import services as port
from console.consumers import CONSOLE_GROUP, PRESENCE_SECONDS
from tests.console.conftest import REFUND, actor

pytestmark = pytest.mark.django_db(transaction=True)
# Routed as with_airlock routes them: by the project's URLconf.
application = websocket_application()


def _connect(path: str, user: Any) -> tuple[bool, Any, WebsocketCommunicator]:
    async def go() -> tuple[bool, Any, WebsocketCommunicator]:
        communicator = WebsocketCommunicator(application, path)
        communicator.scope["user"] = user
        connected, code = await communicator.connect()
        if connected:
            await communicator.disconnect()
        return connected, code, communicator

    return async_to_sync(go)()


def test_anonymous_users_are_turned_away_and_every_member_let_in(people):
    assert _connect("/console/ws/", AnonymousUser())[:2] == (False, 4403)
    # A requester's pages are live too (My requests): what reaches them is filtered, not the door.
    assert _connect("/console/ws/", people["alice"])[0] is True
    assert _connect("/console/ws/", people["otto"])[0] is True


def _until(communicator: WebsocketCommunicator, wanted: Any) -> list[dict[str, Any]]:
    async def go() -> list[dict[str, Any]]:
        seen: list[dict[str, Any]] = []
        while not seen or not wanted(seen[-1]):
            seen.append(await communicator.receive_json_from(timeout=10))
        return seen

    return async_to_sync(go)()


def test_a_new_request_and_its_decision_reach_open_pages(people, shop, sync_runner, finance_policy):
    alice, fran = actor(people["alice"]), actor(people["fran"])

    async def scenario() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        inbox = WebsocketCommunicator(application, "/console/ws/")
        inbox.scope["user"] = people["fran"]
        assert (await inbox.connect())[0]
        run = await database_sync_to_async(runs.start_run)(
            agent="support", message=REFUND, actor=alice
        )
        requested: list[dict[str, Any]] = []
        while not requested or requested[-1]["event"] != "approval_requested":
            requested.append(await inbox.receive_json_from(timeout=10))
        page = WebsocketCommunicator(application, f"/console/ws/runs/{run.pk}/")
        page.scope["user"] = people["fran"]
        assert (await page.connect())[0]
        call = await database_sync_to_async(ToolCall.objects.get)(run=run)
        await database_sync_to_async(port.approve)(call.pk, actor=fran, via="console")
        frames: list[dict[str, Any]] = []
        while not any(f["kind"] == "finish" for m in frames for f in m.get("frames", [])):
            frames.append(await page.receive_json_from(timeout=10))
        await inbox.disconnect()
        await page.disconnect()
        return requested, frames

    requested, frames = async_to_sync(scenario)()
    assert requested[-1]["type"] == "event" and requested[-1]["call_id"].startswith("tc_")
    kinds = [f["kind"] for m in frames if m["type"] == "frames" for f in m["frames"]]
    assert "approval-settled" in kinds and "tool-output" in kinds and kinds[-1] == "finish"
    events = [m["event"] for m in frames if m["type"] == "event"]
    assert "approval_settled" in events


def _on_the_inbox(people: Any, message: dict[str, Any], count: int) -> list[dict[str, Any]]:
    """What an open inbox page receives after ``message`` is sent to the console's group."""

    async def go() -> list[dict[str, Any]]:
        inbox = WebsocketCommunicator(application, "/console/ws/")
        inbox.scope["user"] = people["otto"]
        assert (await inbox.connect())[0]
        await get_channel_layer().group_send(CONSOLE_GROUP, message)
        received = [await inbox.receive_json_from(timeout=10) for _ in range(count)]
        await inbox.disconnect()
        return received

    return async_to_sync(go)()


def test_events_that_left_as_one_message_reach_the_page_one_by_one_in_order(people):
    # The broadcast thread merges the events queued together (``broadcast.merge``).
    events = [
        {"event": "run_started", "run_id": "run_a", "call_id": ""},
        {"event": "approval_requested", "run_id": "run_a", "call_id": "tc_a"},
    ]
    message = {"type": "console.events", "events": events}
    assert _on_the_inbox(people, message, 2) == [{"type": "event", **event} for event in events]


def test_an_event_as_the_version_before_sent_it_reaches_the_page(people):
    # During a rolling deploy, an older process's event reaches a newer streams process.
    event = {"event": "run_started", "run_id": "run_a", "call_id": ""}
    message = {"type": "console.event", "event": event}
    assert _on_the_inbox(people, message, 1) == [{"type": "event", **event}]


async def _page(user: Any) -> WebsocketCommunicator:
    page = WebsocketCommunicator(application, "/console/ws/")
    page.scope["user"] = user
    assert (await page.connect())[0]
    return page


def _viewing(who: str, call_id: str, viewing: bool = True) -> dict[str, Any]:
    return {
        "type": "presence",
        "call_id": call_id,
        "who": who,
        "viewing": viewing,
        "seconds": PRESENCE_SECONDS,
    }


def test_two_approvers_with_a_card_open_see_each_other_until_one_leaves(people, refund):
    async def scenario() -> None:
        fran, felix = await _page(people["fran"]), await _page(people["felix"])
        await fran.send_json_to({"type": "viewing", "call_id": refund.pk})
        assert await fran.receive_nothing(timeout=0.3)  # alone with it
        await felix.send_json_to({"type": "viewing", "call_id": refund.pk})
        # Each learns of the other at once: fran hears felix arrive, felix hears fran answer.
        assert await fran.receive_json_from(timeout=5) == _viewing("felix", refund.pk)
        assert await felix.receive_json_from(timeout=5) == _viewing("fran", refund.pk)
        await felix.send_json_to({"type": "viewing", "call_id": refund.pk})  # still there
        assert await fran.receive_json_from(timeout=5) == _viewing("felix", refund.pk)
        assert await felix.receive_nothing(timeout=0.3)  # a word again asks for no answer
        await felix.send_json_to({"type": "left", "call_id": refund.pk})
        assert await fran.receive_json_from(timeout=5) == _viewing("felix", refund.pk, False)
        await felix.send_json_to({"type": "viewing", "call_id": refund.pk})
        assert await fran.receive_json_from(timeout=5) == _viewing("felix", refund.pk)
        assert await felix.receive_json_from(timeout=5) == _viewing("fran", refund.pk)
        await fran.disconnect()  # a closed page leaves every card it had open
        assert await felix.receive_json_from(timeout=5) == _viewing("fran", refund.pk, False)
        await felix.disconnect()

    async_to_sync(scenario)()


def test_who_may_not_see_the_call_neither_hears_nor_is_heard(people, refund):
    async def scenario() -> None:
        fran, bob = await _page(people["fran"]), await _page(people["bob"])
        await fran.send_json_to({"type": "viewing", "call_id": refund.pk})
        await bob.send_json_to({"type": "viewing", "call_id": refund.pk})  # alice's refund
        await bob.send_json_to({"type": "viewing", "call_id": "tc_unknown"})
        assert await bob.receive_nothing(timeout=0.5)
        assert await fran.receive_nothing(timeout=0.2)
        await fran.disconnect()
        await bob.disconnect()

    async_to_sync(scenario)()


def test_a_deployment_without_presence_tells_nobody(people, refund):
    async def scenario() -> None:
        fran, felix = await _page(people["fran"]), await _page(people["felix"])
        for page in (fran, felix):
            await page.send_json_to({"type": "viewing", "call_id": refund.pk})
        assert await fran.receive_nothing(timeout=0.5)
        assert await felix.receive_nothing(timeout=0.2)
        await fran.disconnect()
        await felix.disconnect()

    with override_settings(AIRLOCK_CONSOLE={"PRESENCE": False}):
        async_to_sync(scenario)()


def test_a_page_says_how_long_a_viewer_is_shown_and_nothing_when_presence_is_off(login):
    assert (
        f'data-presence-seconds="{PRESENCE_SECONDS}"'
        in login("fran").get(reverse("console:mine")).content.decode()
    )
    with override_settings(AIRLOCK_CONSOLE={"PRESENCE": False}):
        page = login("fran").get(reverse("console:mine")).content.decode()
    assert 'data-presence-seconds="0"' in page  # its script then says nothing of its cards
