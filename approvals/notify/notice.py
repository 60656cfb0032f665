"""What a notification says: one call waiting on people, and where to decide it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.urls import NoReverseMatch, reverse

from agent_core.models import ToolCall

from ..conf import absolute

REQUESTED = "approval-requested"
ESCALATED = "approval-escalated"
REMINDED = "approval-reminder"
NUDGED = "approval-nudged"  # an operator asked again (approvals.nudge)


@dataclass(frozen=True)
class Contact:
    """A person to notify: their actor ref, and how to reach them."""

    ref: str
    email: str = ""
    name: str = ""


@dataclass(frozen=True)
class Notice:
    """One call waiting on people, as a notification channel renders it."""

    event: str  # REQUESTED, ESCALATED or REMINDED
    tool_call_id: str
    tool_name: str
    args: dict[str, Any]
    confirmation: str
    approver: str
    requester_ref: str
    run_id: str
    thread_id: str
    expires_at: datetime | None
    inbox_url: str = ""
    recipient: Contact | None = None  # None: a channel that reaches people as a whole
    # "approve" / "reject" (and "snooze" for a call with a deadline; a question: "answer") -> a
    # signed, single-use link for ``recipient`` (approvals.links).
    links: dict[str, str] = field(default_factory=dict)

    @property
    def headline(self) -> str:
        """One line: what waits, on whom."""
        if not self.approver:  # a human tool's question: it has no approver, it is asked
            return f"Question for you: {self.tool_name} ({self.tool_call_id})"
        lead = {
            ESCALATED: "Escalated: approval",
            REMINDED: "Reminder: approval",
            NUDGED: "Reminder: approval",
        }.get(self.event, "Approval")
        return f"{lead} needed: {self.tool_name} ({self.tool_call_id}), waiting on {self.approver}"

    def as_json(self) -> dict[str, Any]:
        """The JSON payload of a webhook."""
        return {
            "event": self.event,
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "args": self.args,
            "confirmation": self.confirmation,
            "approver": self.approver,
            "requester": self.requester_ref,
            "run_id": self.run_id,
            "thread_id": self.thread_id,
            "expires_at": self.expires_at.isoformat() if self.expires_at else None,
            "inbox_url": self.inbox_url,
            "recipient": self.recipient.ref if self.recipient else None,
            "links": self.links,
        }


def notice_for(
    call: ToolCall, event: str, recipient: Contact | None, links: dict[str, str]
) -> Notice:
    """The notice of ``call`` for ``recipient`` (or a whole channel)."""
    return Notice(
        event=event,
        tool_call_id=call.pk,
        tool_name=call.tool_name,
        args=call.args,
        confirmation=call.confirmation,
        approver=call.approver,
        requester_ref=call.requester_ref,
        run_id=call.run_id,
        thread_id=call.thread_id,
        expires_at=call.expires_at,
        inbox_url=absolute(_path("console:inbox")),
        recipient=recipient,
        links=links,
    )


def _path(name: str) -> str:
    # The console is optional: without it, a notice carries no inbox link.
    try:
        return reverse(name)
    except NoReverseMatch:
        return ""


def contact_of(ref: str) -> Contact:
    """How to reach the actor ``ref`` (``user:<pk>``: the Django user's email and name)."""
    return contacts_of([ref])[ref]


def contacts_of(refs: Iterable[str]) -> dict[str, Contact]:
    """How to reach each of ``refs``, by ref, in one query for the users among them."""
    wanted = set(refs)
    by_pk = {}
    for ref in wanted:
        kind, _, pk = ref.partition(":")
        if kind == "user" and pk.isdigit():
            by_pk[int(pk)] = ref
    found = {ref: Contact(ref) for ref in wanted}
    for user in get_user_model().objects.filter(pk__in=by_pk) if by_pk else ():
        name = user.get_full_name() or user.get_username()
        ref = by_pk[user.pk]
        found[ref] = Contact(ref, email=getattr(user, "email", "") or "", name=name)
    return found
