"""The console's live channel: "something changed" events, a run's frames on its page, and who
else has a card open (presence).

Read-only as to decisions: the page refetches the fragment an event concerns; decisions go over
HTTP forms. The one thing a page says is which cards it has open (``viewing`` / ``left``).
"""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from agent_core.actors import actor_for_user
from agent_core.engine.access import is_operator, may_see_run, visible_runs
from agent_core.engine.stream_log import group_name
from agent_core.models import ToolCall
from approvals.guards import may_see

from .access import is_member
from .conf import console_settings

CONSOLE_GROUP = "airlock.console"
# A viewer is shown this long after their page last said it has the card open; the page says it
# again every third of it. Leaving the card or closing the page ends it at once; a browser or a
# server that dies without a word is forgotten when this runs out.
PRESENCE_SECONDS = 45
# Cards one page may say it has open at once: what one socket may make the others hear about.
MOST_VIEWED = 20


def presence_group(call_id: str) -> str:
    """The Channels group of the pages that have ``call_id``'s card open."""
    return f"airlock.console.viewing.{call_id}"


def _may_follow(user: Any, run_id: str) -> bool:
    return may_see_run(actor_for_user(user), run_id)


def _seen(user: Any, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``events`` about runs ``user`` may see (``agent_core.engine.access``, with the roles it
    holds now): every console page shares one group, and an event names a call and its run."""
    actor = actor_for_user(user)
    if is_operator(actor):
        return events
    run_ids = {e["run_id"] for e in events}
    seen = set(visible_runs(actor).filter(pk__in=run_ids).values_list("pk", flat=True))
    return [e for e in events if e["run_id"] in seen]


def _card_run(user: Any, call_id: str) -> str | None:
    """The run of the call whose card ``user`` may open (``approvals.guards.may_see``, the
    card's own rule), else ``None``."""
    call = ToolCall.objects.filter(pk=call_id).first()
    if call is None or not may_see(actor_for_user(user), call):
        return None
    return call.run_id


class ConsoleConsumer(AsyncJsonWebsocketConsumer):
    """Joins ``airlock.console`` (and ``agent_run.<id>`` on a run's page) for a console user,
    and the presence group of each card its page has open."""

    groups: list[str]
    viewing: dict[str, str]  # call id → its run's id, for the cards this page has open

    async def connect(self) -> None:
        user = self.scope.get("user")
        # Any member: a requester's My requests and inbox are live too. What each page hears
        # is what its user may see (``_seen``), so the door is not the filter.
        if user is None or not await database_sync_to_async(is_member)(user):
            await self.close(code=4403)
            return
        self.groups = [CONSOLE_GROUP]
        self.viewing = {}
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
        for call_id in list(getattr(self, "viewing", {})):
            await self._leave(call_id)
        for group in getattr(self, "groups", []):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """``{"type": "viewing" | "left", "call_id"}``: the page opened (or still has open)
        a card, or closed it. Anything else, and everything when presence is off, is ignored."""
        if not console_settings().PRESENCE or not isinstance(content, dict):
            return
        call_id = content.get("call_id")
        if not isinstance(call_id, str):
            return
        if content.get("type") == "viewing":
            await self._view(call_id)
        elif content.get("type") == "left" and call_id in self.viewing:
            await self._leave(call_id)

    async def _view(self, call_id: str) -> None:
        first = call_id not in self.viewing
        if first and len(self.viewing) >= MOST_VIEWED:
            return
        # Asked again each time the page says so: a viewer who lost the right to see the call
        # stops being shown, and stops hearing of others.
        run_id = await database_sync_to_async(_card_run)(self.scope["user"], call_id)
        if run_id is None:
            if not first:
                await self._leave(call_id)
            return
        if first:
            self.viewing[call_id] = run_id
            await self.channel_layer.group_add(presence_group(call_id), self.channel_name)
        # The first word asks the others who have it open to answer (``hello``): the newcomer
        # learns of them at once rather than at their next word.
        await self.channel_layer.group_send(
            presence_group(call_id), self._presence(call_id, viewing=True, hello=first)
        )

    async def _leave(self, call_id: str) -> None:
        await self.channel_layer.group_send(
            presence_group(call_id), self._presence(call_id, viewing=False)
        )
        await self.channel_layer.group_discard(presence_group(call_id), self.channel_name)
        del self.viewing[call_id]

    def _presence(self, call_id: str, *, viewing: bool, hello: bool = False) -> dict[str, Any]:
        user = self.scope["user"]
        return {
            "type": "console.presence",
            "call_id": call_id,
            "run_id": self.viewing[call_id],
            "who": user.get_username(),
            "user_id": user.pk,
            "channel": self.channel_name,
            "viewing": viewing,
            "hello": hello,
        }

    async def console_presence(self, message: dict[str, Any]) -> None:
        """Someone else opened, still has open or closed a card this page has open: told to the
        page if its user may see the call (the rule of the console's events), and answered
        with this page's own presence when they just opened it."""
        user = self.scope["user"]
        call_id = message["call_id"]
        if message["user_id"] == user.pk or call_id not in self.viewing:
            return  # the user's own other tabs; a card this page closed meanwhile
        if not await database_sync_to_async(_seen)(user, [message]):
            return
        await self.send_json(
            {
                "type": "presence",
                "call_id": call_id,
                "who": message["who"],
                "viewing": message["viewing"],
                "seconds": PRESENCE_SECONDS,
            }
        )
        if message["hello"]:
            await self.channel_layer.send(message["channel"], self._presence(call_id, viewing=True))

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
