"""Decide from a link: signed, expiring, single-use approve / reject links for one person.

A notification carries, per recipient, two links (``approve`` and ``reject``) whose token is
``django.core.signing`` over ``{call, person, action, via, nonce}``; the two share the nonce, so
using one spends both. Opening a link shows a confirmation page (a GET never decides); the POST
spends the link (a ``LinkUse`` row, committed first) and decides through the approval port as the
link's person, with ``via`` the channel (``email``, ``slack``), under the same authorization.
A used, expired or tampered link decides nothing and is audited as a refused attempt.

A link is refused, and not spent, when its person may no longer use it (``refusal``): they were
deactivated (403 ``link_inactive``), they may no longer decide the call (403 ``not_approver``),
or the browser is signed in as someone else (403 ``link_other_person``: a link is no bearer
credential for whoever holds it while signed in).

A question (a human tool's call, ``pending_input``) gets one ``answer`` link instead: it opens a
form of the question's answer, and its POST answers through the port as the link's person. It is
spent when the answer is recorded, not before, so an answer the schema refuses can be retyped;
a second answer is refused by the call's own state.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from django.contrib.auth import get_user_model
from django.core import signing
from django.db import IntegrityError, transaction
from django.urls import reverse

from agent_core.actors import Actor, actor_for_user
from agent_core.choices import CallStatus
from agent_core.engine import clock
from agent_core.exceptions import AgentCoreError
from agent_core.models import ToolCall

from . import amendments, services
from .attempts import Entry, audit
from .conf import absolute, approvals_settings
from .exceptions import NotApprover
from .grants import Scope
from .models import Action, LinkUse
from .policy import get_policy

SALT = "airlock.approvals.decision-link"
ACTIONS = (Action.APPROVE, Action.REJECT)
# A link that moves the deadline back (``reminders.snooze_until``), with a nonce of its own: a
# snooze does not spend the approve and reject links.
SNOOZE = "snooze"
AUDITED = (*ACTIONS, Action.ANSWER)


class LinkRefused(AgentCoreError):
    """This link is not valid (it was changed or cut short)."""

    code = "link_invalid"
    status_code = HTTPStatus.BAD_REQUEST


class LinkExpired(LinkRefused):
    """This link has expired: decide in the inbox instead."""

    code = "link_expired"
    status_code = HTTPStatus.GONE


class LinkUsed(LinkRefused):
    """This link has already been used: each link works once."""

    code = "link_used"
    status_code = HTTPStatus.CONFLICT


class LinkInactive(AgentCoreError):
    """The person this link was sent to is no longer active: it decides nothing."""

    code = "link_inactive"
    status_code = HTTPStatus.FORBIDDEN


class LinkOtherPerson(AgentCoreError):
    """This link was sent to someone else than the person signed in here: sign out to use it,
    or decide in the console."""

    code = "link_other_person"
    status_code = HTTPStatus.FORBIDDEN


@dataclass(frozen=True)
class Link:
    """What a valid token says: who may do what to which call, through which channel."""

    tool_call_id: str
    actor_ref: str
    action: str
    via: str
    nonce: str


def decision_links(call: ToolCall, actor_ref: str, *, via: str) -> dict[str, str]:
    """The approve and reject links of ``call`` for ``actor_ref``, as absolute URLs."""
    nonce = secrets.token_urlsafe(16)
    links = {
        action.value: absolute(reverse("approvals_api:link", args=[action.value, token]))
        for action in ACTIONS
        for token in [_token(call.pk, actor_ref, action.value, via, nonce)]
    }
    if call.expires_at is not None:
        token = _token(call.pk, actor_ref, SNOOZE, via, secrets.token_urlsafe(16))
        links[SNOOZE] = absolute(reverse("approvals_api:link", args=[SNOOZE, token]))
    return links


def answer_link(call: ToolCall, actor_ref: str, *, via: str) -> dict[str, str]:
    """The link that answers the question ``call`` as ``actor_ref``, as an absolute URL."""
    token = _token(call.pk, actor_ref, Action.ANSWER.value, via, secrets.token_urlsafe(16))
    return {Action.ANSWER.value: absolute(reverse("approvals_api:link", args=["answer", token]))}


def links_for(call: ToolCall, actor_ref: str, *, via: str) -> dict[str, str]:
    """What a notification of ``call`` offers ``actor_ref``: answer a question, else decide."""
    if call.status == CallStatus.PENDING_INPUT:
        return answer_link(call, actor_ref, via=via)
    return decision_links(call, actor_ref, via=via)


def _token(call_id: str, actor_ref: str, action: str, via: str, nonce: str) -> str:
    payload = {"c": call_id, "u": actor_ref, "a": action, "v": via, "n": nonce}
    return signing.dumps(payload, salt=SALT, compress=True)


def read(action: str, token: str) -> Link:
    """The link ``token`` stands for; raises ``LinkExpired``, ``LinkUsed`` or ``LinkRefused``.

    ``action`` is the one in the link's path, which the token must sign too."""
    try:
        data = signing.loads(token, salt=SALT, max_age=approvals_settings().LINK_MAX_AGE)
    except signing.SignatureExpired as exc:
        raise LinkExpired() from exc
    except signing.BadSignature as exc:
        raise LinkRefused() from exc
    if not isinstance(data, dict) or data.get("a") != action:
        raise LinkRefused()
    link = Link(data["c"], data["u"], data["a"], data["v"], data["n"])
    if LinkUse.objects.filter(nonce=link.nonce).exists():
        raise LinkUsed()
    return link


def use(
    action: str,
    token: str,
    *,
    signed_in: Actor | None = None,
    reason: str = "",
    remember: bool | Scope = False,
) -> services.Outcome:
    """Spend the link and decide with it (an approval may ``remember`` within a scope);
    refusals of the link are audited, then raised.

    ``signed_in``: the actor of the browser's session, if any. A refusal of the person
    (``refusal``) leaves the link unspent."""
    link = check(action, token)
    actor = actor_of(link.actor_ref)
    call = ToolCall.objects.filter(pk=link.tool_call_id).first()
    refused = refusal(link, actor, call, signed_in=signed_in)
    if refused is not None:
        # Who tried: the person signed in, when the link is someone else's.
        tried = signed_in if isinstance(refused, LinkOtherPerson) and signed_in else actor
        audit(Entry.refused(link.tool_call_id, call, link.action, tried, link.via[:64], refused))
        raise refused
    try:
        with transaction.atomic():
            LinkUse.objects.create(
                nonce=link.nonce,
                tool_call_id=link.tool_call_id,
                actor_ref=link.actor_ref,
                action=link.action,
            )
    except IntegrityError:
        used = LinkUsed()
        _audit(action, used, call_id=link.tool_call_id, actor_ref=link.actor_ref, via=link.via)
        raise used from None
    if link.action == SNOOZE:
        now = clock.now()
        deadline = amendments.snooze_until(call, now) if call else now
        return amendments.extend(link.tool_call_id, actor=actor, expires_at=deadline, via=link.via)
    if link.action == Action.APPROVE:
        return services.approve(link.tool_call_id, actor=actor, via=link.via, remember=remember)
    return services.reject(link.tool_call_id, actor=actor, via=link.via, reason=reason)


def refusal(
    link: Link, actor: Actor, call: ToolCall | None, *, signed_in: Actor | None
) -> AgentCoreError | None:
    """Why the link's person may not use it now, or ``None`` (the port still authorizes the
    decision itself). Checked before the link is spent, so a refusal leaves it usable."""
    if signed_in is not None and signed_in.ref != link.actor_ref:
        return LinkOtherPerson()
    user = user_of(link.actor_ref)
    if user is not None and not user.is_active:
        return LinkInactive()
    # The link itself told its person of the call: a 403, not the 404 of an unseen id.
    if call is not None and not get_policy().can_decide(actor, call):
        return NotApprover("You may no longer decide this call.")
    return None


def use_answer(token: str, answer: object) -> services.Outcome:
    """Answer with the link's question, then spend the link (see the module's docstring)."""
    link = check(Action.ANSWER, token)
    outcome = services.answer(
        link.tool_call_id, actor=actor_of(link.actor_ref), answer=answer, via=link.via
    )
    LinkUse.objects.get_or_create(
        nonce=link.nonce,
        defaults={
            "tool_call_id": link.tool_call_id,
            "actor_ref": link.actor_ref,
            "action": link.action,
        },
    )
    return outcome


def check(action: str, token: str) -> Link:
    """``read``, auditing a refused link as a refused decision attempt."""
    try:
        return read(action, token)
    except LinkRefused as refusal:
        data = _unsigned(token)
        _audit(
            action,
            refusal,
            call_id=str(data.get("c", "")),
            actor_ref=str(data.get("u", "")),
            via=str(data.get("v", "link")),
        )
        raise


def actor_of(ref: str) -> Actor:
    """The actor a link names, with the roles they hold now (``user:<pk>``: the user's groups)."""
    user = user_of(ref)
    return actor_for_user(user) if user is not None else Actor(ref=ref)


def user_of(ref: str) -> Any:
    """The Django user behind ``user:<pk>``, or ``None``."""
    kind, _, pk = ref.partition(":")
    if kind != "user" or not pk.isdigit():
        return None
    return get_user_model().objects.filter(pk=pk).first()


def _unsigned(token: str) -> dict[str, object]:
    # Only to label the audit row of a refused link: what it claims, trusted for nothing else.
    try:
        data = signing.loads(token, salt=SALT, max_age=None)
    except signing.BadSignature:
        return {}
    return data if isinstance(data, dict) else {}


def _audit(action: str, refusal: LinkRefused, *, call_id: str, actor_ref: str, via: str) -> None:
    action = Action.EXTEND if action == SNOOZE else action if action in AUDITED else Action.APPROVE
    refused = Entry(call_id, action, actor_ref or "anonymous", via[:64], refusal.code)
    audit(refused.noted(refusal.message))
