"""Token authentication that reads the token's user and the user's roles in one query.

DRF's ``TokenAuthentication`` reads the token with its user, then the actor resolver reads the
user's groups: two queries on every API request. This one reads the token with its user and the
names of the user's groups (an array subquery) in one query, built by the ORM for the configured
(swappable) user model, and hands the groups to ``actors.actor_for_user`` on the user, so the
default resolvers need no query of their own. Its answers (401 for an unknown key or an inactive
user) are DRF's.
"""

from __future__ import annotations

import functools
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.postgres.expressions import ArraySubquery
from django.core.exceptions import ObjectDoesNotExist
from django.db.models import Model, OuterRef, QuerySet
from django.utils.translation import gettext_lazy as _
from rest_framework import authentication, exceptions

from ..actors import ROLES_ATTRIBUTE


class TokenAuthentication(authentication.TokenAuthentication):
    """``Authorization: Token <key>``, as DRF's, in one query with the user's roles."""

    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        try:
            token: Any = _tokens(self.get_model()).get(key=key)
        except ObjectDoesNotExist:
            raise exceptions.AuthenticationFailed(_("Invalid token.")) from None
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        setattr(token.user, ROLES_ATTRIBUTE, frozenset(token.roles))
        return token.user, token


@functools.cache
def _tokens(token_model: type[Model]) -> QuerySet[Any]:
    """The tokens of ``token_model``, each with its user and the names of the user's groups
    (``roles``). Built once per process (the user model is known once the apps are loaded); each
    request's ``get`` clones it."""
    # The groups of the token's user, by the name the user model gives their relation.
    member = get_user_model()._meta.get_field("groups").related_query_name()
    roles = Group.objects.filter(**{member: OuterRef("user")}).values("name")
    return token_model._default_manager.select_related("user").annotate(roles=ArraySubquery(roles))
