"""Decide from a link: signed, expiring, single-use approve / reject links for one person.

A notification carries, per recipient, two links (``approve`` and ``reject``) whose token is
``django.core.signing`` over ``{call, person, action, via, nonce}``; the two share the nonce, so
using one spends both. Opening a link shows a confirmation page (a GET never decides); the POST
spends the link (a ``LinkUse`` row, committed first) and decides through the approval port as the
link's person, with ``via`` the channel (``email``, ``slack``), under the same authorization.
A used, expired or tampered link decides nothing and is audited as a refused attempt.

A question (a human tool's call, ``pending_input``) gets one ``answer`` link instead: it opens a
form of the question's answer, and its POST answers through the port as the link's person. It is
spent when the answer is recorded, not before, so an answer the schema refuses can be retyped;
a second answer is refused by the call's own state.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from http import HTTPStatus

from django.contrib.auth import get_user_model
from django.core import signing
from django.db import IntegrityError, transaction
from django.urls import reverse

from agent_core.actors import Actor, actor_for_user
from agent_core.choices import CallStatus
from agent_core.exceptions import AgentCoreError
from agent_core.models import ToolCall

from . import services
from .conf import absolute, approvals_settings
from .models import Action, DecisionAttempt, LinkUse

SALT = "airlock.approvals.decision-link"
ACTIONS = (Action.APPROVE, Action.REJECT)
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
    return {
        action.value: absolute(reverse("approvals_api:link", args=[action.value, token]))
        for action in ACTIONS
        for token in [_token(call.pk, actor_ref, action.value, via, nonce)]
    }


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


def use(action: str, token: str, *, reason: str = "") -> services.Outcome:
    """Spend the link and decide with it; refusals of the link are audited, then raised."""
    link = check(action, token)
    try:
        with transaction.atomic():
            LinkUse.objects.create(
                nonce=link.nonce,
                tool_call_id=link.tool_call_id,
                actor_ref=link.actor_ref,
                action=link.action,
            )
    except IntegrityError:
        refusal = LinkUsed()
        _audit(action, refusal, call_id=link.tool_call_id, actor_ref=link.actor_ref, via=link.via)
        raise refusal from None
    actor = actor_of(link.actor_ref)
    if link.action == Action.APPROVE:
        return services.approve(link.tool_call_id, actor=actor, via=link.via)
    return services.reject(link.tool_call_id, actor=actor, via=link.via, reason=reason)


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
    kind, _, pk = ref.partition(":")
    user = (
        get_user_model().objects.filter(pk=pk).first() if kind == "user" and pk.isdigit() else None
    )
    return actor_for_user(user) if user is not None else Actor(ref=ref)


def _unsigned(token: str) -> dict[str, object]:
    # Only to label the audit row of a refused link: what it claims, trusted for nothing else.
    try:
        data = signing.loads(token, salt=SALT, max_age=None)
    except signing.BadSignature:
        return {}
    return data if isinstance(data, dict) else {}


def _audit(action: str, refusal: LinkRefused, *, call_id: str, actor_ref: str, via: str) -> None:
    DecisionAttempt.objects.create(
        tool_call_id=call_id,
        action=action if action in AUDITED else Action.APPROVE,
        actor_ref=actor_ref or "anonymous",
        via=via[:64],
        outcome=refusal.code,
        detail=refusal.message,
    )
