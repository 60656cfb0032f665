"""Who is calling: the configured ``AGENT["ACTOR_RESOLVER"]`` turns a request into an Actor."""

from __future__ import annotations

from typing import Any, Protocol

from django.utils.module_loading import import_string
from rest_framework.exceptions import NotAuthenticated
from rest_framework.permissions import BasePermission

from ..actors import Actor
from ..conf import agent_settings


class ActorResolver(Protocol):
    """Derives the acting ``Actor`` from a request; ``None`` when nobody is identified."""

    def resolve(self, request: Any) -> Actor | None: ...


def get_resolver() -> ActorResolver:
    resolver: ActorResolver = import_string(agent_settings().ACTOR_RESOLVER)()
    return resolver


def request_actor(request: Any) -> Actor:
    """The request's actor (cached on the request); raises ``NotAuthenticated`` (401)."""
    actor: Actor | None = getattr(request, "_airlock_actor", None)
    if actor is None:
        actor = get_resolver().resolve(request)
        if actor is None:
            raise NotAuthenticated("Sign in, or send credentials, to use this API.")
        request._airlock_actor = actor
    return actor


class HasActor(BasePermission):
    """DRF permission: the request must resolve to an actor."""

    def has_permission(self, request: Any, view: Any) -> bool:
        request_actor(request)
        return True
