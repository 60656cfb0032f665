"""Token authentication that reads the token's user and the user's roles in one statement.

DRF's ``TokenAuthentication`` reads the token with its user, then the actor resolver reads the
user's groups: two queries, each compiled by the ORM, on every API request. This one runs one named
statement (``sql.TOKEN_USER``) and hands the groups to ``actors.actor_for_user`` on the user, so
the default resolvers need no query of their own. Its answers (401 for an unknown key or an
inactive user) are DRF's.
"""

from __future__ import annotations

import functools
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models import Model
from django.utils.translation import gettext_lazy as _
from rest_framework import authentication, exceptions

from ..actors import ROLES_ATTRIBUTE
from ..engine import rows, sql


class TokenAuthentication(authentication.TokenAuthentication):
    """``Authorization: Token <key>``, as DRF's, in one query with the user's roles."""

    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        found = rows.fetch_models_named(
            _token_user(self.get_model()), {"key": key}, get_user_model()
        )
        if found is None:
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        [user], read = found
        if not user.is_active:  # type: ignore[attr-defined]
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        setattr(user, ROLES_ATTRIBUTE, frozenset(read["roles"]))
        return user, self.get_model()(key=key, user=user)


@functools.cache
def _token_user(token_model: type[Model]) -> str:
    """``sql.TOKEN_USER`` for these models (the user's columns as ``rows.fetch_models`` reads)."""
    user_model = get_user_model()
    fields = user_model._meta.concrete_fields
    groups = user_model._meta.get_field("groups")
    return sql.TOKEN_USER.format(
        columns=", ".join(f"u.{f.column}" for f in fields),
        group_name=Group._meta.get_field("name").column,
        user_groups=groups.remote_field.through._meta.db_table,  # type: ignore[union-attr]
        group=Group._meta.db_table,
        group_pk=Group._meta.pk.column,
        group_fk=groups.m2m_reverse_name(),
        user_fk=groups.m2m_column_name(),
        user_pk=user_model._meta.pk.column,
        token=token_model._meta.db_table,
        user=user_model._meta.db_table,
        token_user_fk=token_model._meta.get_field("user").column,  # type: ignore[union-attr]
        token_key=token_model._meta.get_field("key").column,  # type: ignore[union-attr]
    )
