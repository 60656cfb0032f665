"""The console's live channel: "something changed" events, and a run's frames on its page.

Read-only: the page refetches the fragment an event concerns; decisions go over HTTP forms.
"""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from agent_core.access import is_operator, may_see_run, visible_runs
from agent_core.actors import actor_for_user
from agent_core.streams import group_name

from .access import has_console_access

CONSOLE_GROUP = "airlock.console"


def _may_follow(user: Any, run_id: str) -> bool:
    return may_see_run(actor_for_user(user), run_id)


def _seen(user: Any, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``events`` about runs ``user`` may see (``agent_core.access``, with the roles it
    holds now): every console page shares one group, and an event names a call and its run."""
    actor = actor_for_user(user)
    if is_operator(actor):
        return events
    run_ids = {e["run_id"] for e in events}
    seen = set(visible_runs(actor).filter(pk__in=run_ids).values_list("pk", flat=True))
    return [e for e in events if e["run_id"] in seen]


class ConsoleConsumer(AsyncJsonWebsocketConsumer):
    """Joins ``airlock.console`` (and ``agent_run.<id>`` on a run's page) for a console user."""

    groups: list[str]

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not await database_sync_to_async(has_console_access)(user):
            await self.close(code=4403)
            return
        self.groups = [CONSOLE_GROUP]
        run_id = self.scope["url_route"]["kwargs"].get("run_id")
        if run_id:
            if not await database_sync_to_async(_may_follow)(user, run_id):
                await self.close(code=4404)  # a run the user may not see is unknown
                return
            self.groups.append(group_name(run_id))
        for group in self.groups:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        for group in getattr(self, "groups", []):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def console_events(self, message: dict[str, Any]) -> None:
        """Calls or runs changed: each ``{"event", "run_id", "call_id"}`` of a run the viewer
        may see goes to the page as one ``event`` message; the others are not its to know of."""
        user = self.scope["user"]
        for event in await database_sync_to_async(_seen)(user, message["events"]):
            await self.send_json({"type": "event", **event})

    async def console_event(self, message: dict[str, Any]) -> None:
        """One event, as a process of the version before ``console.events`` sends it (a rolling
        deploy): without a handler, the page's socket would close."""
        await self.console_events({"events": [message["event"]]})

    async def run_frames(self, message: dict[str, Any]) -> None:
        """Committed frames of the run this page shows."""
        await self.send_json({"type": "frames", "frames": message["frames"]})
