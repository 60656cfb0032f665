"""Who is acting: an ``Actor`` (ref and roles) and the resolvers that derive one from a request."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from .conf import agent_settings


@dataclass(frozen=True)
class Actor:
    """The person or system acting; ``ref`` is stable and stored on rows, ``roles`` grant powers."""

    ref: str
    roles: frozenset[str] = field(default_factory=frozenset)

    def has_role(self, role: str) -> bool:
        return role in self.roles


SYSTEM = Actor(ref="system")


# Where an authentication that read the user's group names with the user leaves them
# (api.auth.TokenAuthentication), so that the actor needs no query of its own.
ROLES_ATTRIBUTE = "_airlock_roles"


def actor_for_user(user: Any) -> Actor:
    """The actor of a Django user: ``user:<pk>``, roles are the user's group names."""
    roles = getattr(user, ROLES_ATTRIBUTE, None)
    if roles is None:
        roles = frozenset(user.groups.values_list("name", flat=True))
    return Actor(ref=f"user:{user.pk}", roles=roles)


class DjangoAuthResolver:
    """The default resolver: the request's authenticated Django user (session or token)."""

    def resolve(self, request: Any) -> Actor | None:
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return None
        return actor_for_user(user)


class HeaderResolver:
    """Development only: trusts ``X-Actor-Id`` and ``X-Actor-Role`` (comma-separated roles).

    Anyone can send these headers, so with ``DEBUG`` off this resolver identifies nobody (401)
    unless ``AGENT["ALLOW_HEADER_ACTOR"]`` says so explicitly, in whatever process serves the
    request; the system check ``agent_core.E004`` reports the same mistake at start-up.
    """

    def resolve(self, request: Any) -> Actor | None:
        if not settings.DEBUG and not agent_settings().ALLOW_HEADER_ACTOR:
            return None
        ref = (request.headers.get("X-Actor-Id") or "").strip()
        if not ref:
            return None
        raw = request.headers.get("X-Actor-Role") or ""
        return Actor(ref=ref, roles=frozenset(r.strip() for r in raw.split(",") if r.strip()))


class DevelopmentResolver(HeaderResolver):
    """Development only (the demo's resolver): a signed-in Django user, else the ``X-Actor-*``
    headers, so both the console's session and the README's curl examples work. With ``DEBUG``
    off only the signed-in user counts, as for ``HeaderResolver``."""

    def resolve(self, request: Any) -> Actor | None:
        return DjangoAuthResolver().resolve(request) or super().resolve(request)
