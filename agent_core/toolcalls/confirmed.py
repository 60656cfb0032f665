"""Confirmed tools (SPEC §17): an action called by a client with no approval channel (an MCP
client, a script) runs only once the caller confirmed what it previewed.

``call(agent, tool, args, actor=...)`` without a token answers a ``Preview``: what the call would
do, and a signed single-use ``confirm_token`` — an HMAC (Django's signing, keyed by
``SECRET_KEY``) over the agent, the tool, the actor, the canonical arguments' digest, the
expiry and a nonce. The same call with that token commits: the token is checked (signature,
expiry, then tool, actor and arguments) and its nonce claimed by inserting a ``ConfirmedCall``
row in the transaction that runs the tool and records its result. A tool that raises, or a
process that dies before the commit, takes the claim with it: the token can commit again. A
committed token answers ``confirm_token_used`` ever after.

An ``atomic`` tool's effect commits with its claim (exactly once); any other tool gets
``ctx.idempotency_key`` (``airlock-<nonce>``, the same for every attempt with one token).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pydantic
from django.core import signing
from django.db import IntegrityError, transaction

from .. import ids
from ..actors import Actor
from ..agents import get_agent
from ..conf import agent_settings
from ..exceptions import (
    ConfirmTokenExpired,
    ConfirmTokenInvalid,
    ConfirmTokenMismatch,
    ConfirmTokenUsed,
    InvalidArguments,
    NotConfirmable,
    ToolFailed,
)
from ..models import ConfirmedCall
from ..tools import ToolContext, ToolSpec, args_digest, to_jsonable

SALT = "airlock.confirmed-tool"


@dataclass(frozen=True)
class Preview:
    """A first call's answer: nothing ran; commit with ``confirm_token`` before ``expires_at``."""

    tool_name: str
    args: dict[str, Any]
    preview: str
    confirm_token: str
    expires_at: datetime


@dataclass(frozen=True)
class Committed:
    """A confirmed call that ran: its result, recorded under ``confirmation_id`` (the nonce)."""

    tool_name: str
    args: dict[str, Any]
    result: Any
    confirmation_id: str


def call(
    agent: str,
    tool_name: str,
    args: dict[str, Any],
    *,
    actor: Actor,
    confirm_token: str | None = None,
) -> Preview | Committed:
    """Preview a confirmed tool's call (no token), or commit it (the preview's token, the same
    arguments, the same actor). Raises ``AgentNotFound``, ``ToolNotFound``,
    ``NotConfirmable``, ``InvalidArguments`` and, with a token, ``ConfirmTokenInvalid`` /
    ``ConfirmTokenExpired`` / ``ConfirmTokenMismatch`` / ``ConfirmTokenUsed`` /
    ``ToolFailed``."""
    tool = get_agent(agent).get_tool(tool_name)
    if tool.confirm != "token":
        raise NotConfirmable(f"{tool_name} is not a confirmed tool")
    canonical = _validated(tool, args)
    digest = args_digest(tool.name, canonical)
    if confirm_token is None:
        return _preview(agent, tool, canonical, digest, actor)
    nonce = _verified(confirm_token, agent=agent, tool=tool, digest=digest, actor=actor)
    return _commit(agent, tool, canonical, digest, actor, nonce)


def _validated(tool: ToolSpec, args: dict[str, Any]) -> dict[str, Any]:
    try:
        return tool.validate_args(args)
    except pydantic.ValidationError as exc:
        errors = json.loads(exc.json(include_url=False, include_context=False))
        raise InvalidArguments(f"the arguments do not fit {tool.name}", errors=errors) from exc


def _preview(
    agent: str, tool: ToolSpec, args: dict[str, Any], digest: str, actor: Actor
) -> Preview:
    nonce = ids.new_id("cf")
    expires = int(time.time()) + agent_settings().CONFIRM_TOKEN_SECONDS
    claims = {"g": agent, "t": tool.name, "a": actor.ref, "d": digest, "x": expires, "n": nonce}
    shown = tool.summarize(_context(actor, nonce), args)
    return Preview(
        tool_name=tool.name,
        args=args,
        preview=shown or f"{tool.name} {json.dumps(args, ensure_ascii=False, sort_keys=True)}",
        confirm_token=signing.dumps(claims, salt=SALT),
        expires_at=datetime.fromtimestamp(expires, tz=UTC),
    )


def _verified(token: str, *, agent: str, tool: ToolSpec, digest: str, actor: Actor) -> str:
    """The token's nonce, once it proves to be this server's, unexpired, for this call."""
    try:
        claims = signing.loads(token, salt=SALT)
    except signing.BadSignature:
        raise ConfirmTokenInvalid() from None
    if not isinstance(claims, dict) or not isinstance(claims.get("n"), str):
        raise ConfirmTokenInvalid()
    if not isinstance(claims.get("x"), int) or claims["x"] <= time.time():
        raise ConfirmTokenExpired()
    if (claims.get("g"), claims.get("t")) != (agent, tool.name):
        raise ConfirmTokenMismatch("the confirm_token was issued for another tool")
    if claims.get("a") != actor.ref:
        raise ConfirmTokenMismatch("the confirm_token was issued to another actor")
    if claims.get("d") != digest:
        raise ConfirmTokenMismatch("the confirm_token was issued for other arguments")
    nonce: str = claims["n"]
    return nonce


def _commit(
    agent: str, tool: ToolSpec, args: dict[str, Any], digest: str, actor: Actor, nonce: str
) -> Committed:
    with transaction.atomic():
        try:
            # The claim: a second commit of this token waits here for the first to end, then
            # finds its row (used) or, if the first rolled back, claims it itself.
            with transaction.atomic():
                ConfirmedCall.objects.create(
                    nonce=nonce,
                    agent=agent,
                    tool_name=tool.name,
                    actor_ref=actor.ref,
                    args=args,
                    args_digest=digest,
                )
        except IntegrityError:
            raise ConfirmTokenUsed() from None
        try:
            result = to_jsonable(tool(_context(actor, nonce), args))
        except Exception as exc:
            raise ToolFailed(f"{tool.name} failed: {type(exc).__name__}: {exc}") from exc
        ConfirmedCall.objects.filter(pk=nonce).update(result=result)
    return Committed(tool_name=tool.name, args=args, result=result, confirmation_id=nonce)


def _context(actor: Actor, nonce: str) -> ToolContext:
    return ToolContext(
        run_id="",
        thread_id="",
        tool_call_id=nonce,
        actor=actor,
        idempotency_key=f"airlock-{nonce}",
    )
